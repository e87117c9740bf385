//! The tests of `kernel/source.rs`.

use super::*;

fn kernel_like_tree(dir: &Path) {
    std::fs::write(dir.join("Makefile"), "all:\n").unwrap();
    std::fs::write(dir.join("Kconfig"), "config A\n").unwrap();
    std::fs::create_dir_all(dir.join("kernel/trace")).unwrap();
    std::fs::write(dir.join("kernel/trace/trace_events_user.c"), "int x;\n").unwrap();
}

fn git(dir: &Path, args: &[&str]) {
    let sh = sh().unwrap();
    let config = ["-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false"];
    stdout(cmd!(sh, "git -C {dir} {config...} {args...}")).unwrap();
}

#[test]
fn git_tree_identity_follows_head_dirty_and_untracked_files() {
    let dir = tempfile::tempdir().unwrap();
    kernel_like_tree(dir.path());
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "."]);
    git(dir.path(), &["commit", "-qm", "base"]);
    let clean = identify_tree(dir.path()).unwrap();
    assert_eq!(clean.kind, "git-tree");
    assert_eq!(clean.git_dirty, Some(false));
    assert_eq!(identify_tree(dir.path()).unwrap().id, clean.id, "identity is stable");

    let file = dir.path().join("kernel/trace/trace_events_user.c");
    std::fs::write(&file, "int x = 1;\n").unwrap();
    let dirty = identify_tree(dir.path()).unwrap();
    assert_ne!(dirty.id, clean.id, "a dirty file changes the identity");
    assert_eq!(dirty.git_dirty, Some(true));

    std::fs::write(&file, "int x;\n").unwrap();
    assert_eq!(identify_tree(dir.path()).unwrap().id, clean.id);
    std::fs::write(dir.path().join("new.c"), "").unwrap();
    assert_ne!(identify_tree(dir.path()).unwrap().id, clean.id, "an untracked file changes it");
    std::fs::remove_file(dir.path().join("new.c")).unwrap();

    git(dir.path(), &["commit", "-qm", "empty", "--allow-empty"]);
    assert_ne!(identify_tree(dir.path()).unwrap().id, clean.id, "a new HEAD changes it");
}

#[test]
fn plain_tree_identity_follows_file_changes() {
    let dir = tempfile::tempdir().unwrap();
    kernel_like_tree(dir.path());
    let a = identify_tree(dir.path()).unwrap();
    assert_eq!(a.kind, "tree");
    std::fs::write(dir.path().join("kernel/trace/trace_events_user.c"), "int x = 22;\n").unwrap();
    assert_ne!(identify_tree(dir.path()).unwrap().id, a.id);
    let err = identify_tree(&dir.path().join("kernel")).unwrap_err();
    assert_eq!(crate::support::exit::code_for(&err), 128);
}

const PATCH: &str = "\
--- a/kernel/trace/trace_events_user.c
+++ b/kernel/trace/trace_events_user.c
@@ -1 +1 @@
-int x;
+int x = 5;
";

#[test]
fn mirror_applies_patches_without_touching_the_source_and_restores_them() {
    let src = tempfile::tempdir().unwrap();
    kernel_like_tree(src.path());
    let work = tempfile::tempdir().unwrap();
    let mirror = work.path().join("src");
    let state = work.path().join("state.json");
    let patch_path = work.path().join("one.patch");
    std::fs::write(&patch_path, PATCH).unwrap();
    let patch = Patch::read(&patch_path).unwrap();
    let rel = "kernel/trace/trace_events_user.c";

    sync_mirror(src.path(), &mirror, &state, "id1", std::slice::from_ref(&patch)).unwrap();
    assert_eq!(std::fs::read_to_string(mirror.join(rel)).unwrap(), "int x = 5;\n");
    assert_eq!(std::fs::read_to_string(src.path().join(rel)).unwrap(), "int x;\n", "source untouched");

    let patched_mtime = std::fs::metadata(mirror.join(rel)).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    sync_mirror(src.path(), &mirror, &state, "id1", &[]).unwrap();
    assert_eq!(std::fs::read_to_string(mirror.join(rel)).unwrap(), "int x;\n", "patch undone");
    let restored = std::fs::metadata(mirror.join(rel)).unwrap().modified().unwrap();
    assert!(restored > patched_mtime, "a restored file is newer than the build that used the patch");
    assert_eq!(std::fs::read_to_string(src.path().join(rel)).unwrap(), "int x;\n");
}

#[test]
fn a_mirror_already_synced_to_the_same_source_and_patches_is_left_alone() {
    let src = tempfile::tempdir().unwrap();
    kernel_like_tree(src.path());
    std::fs::write(src.path().join("Makefile"), "all:\n").unwrap();
    let work = tempfile::tempdir().unwrap();
    let (mirror, state) = (work.path().join("src"), work.path().join("state.json"));
    let patch_path = work.path().join("one.patch");
    std::fs::write(&patch_path, PATCH).unwrap();
    let patch = Patch::read(&patch_path).unwrap();
    let rel = "kernel/trace/trace_events_user.c";
    sync_mirror(src.path(), &mirror, &state, "id1", std::slice::from_ref(&patch)).unwrap();
    let mtime = || std::fs::metadata(mirror.join(rel)).unwrap().modified().unwrap();
    let first = mtime();
    // A stray file only a sync would delete shows whether one ran.
    std::fs::write(mirror.join("stray"), "x").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    sync_mirror(src.path(), &mirror, &state, "id1", std::slice::from_ref(&patch)).unwrap();
    assert!(mirror.join("stray").exists(), "the same source and patches: no sync");
    assert_eq!(mtime(), first, "the patched file is not rewritten");
    sync_mirror(src.path(), &mirror, &state, "id2", std::slice::from_ref(&patch)).unwrap();
    assert!(!mirror.join("stray").exists(), "another source identity: synced again");
    assert!(mtime() > first, "and the patched file rewritten");
}

/// Every file of `dir` dated a year back, as an unpacked tarball or a git export is.
fn backdate(dir: &Path) {
    let sh = sh().unwrap();
    let each = "{}";
    stdout(cmd!(sh, "find {dir} -type f -exec touch -d 2025-01-01 {each} +")).unwrap();
}

#[test]
fn a_switch_to_another_tree_refreshes_exactly_the_files_whose_content_differs() {
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    kernel_like_tree(one.path());
    kernel_like_tree(two.path());
    let rel = "kernel/trace/trace_events_user.c";
    std::fs::write(two.path().join(rel), "int x = 7;\n").unwrap();
    std::fs::write(two.path().join("kernel/new.c"), "int n;\n").unwrap();
    backdate(one.path());
    backdate(two.path());
    let work = tempfile::tempdir().unwrap();
    let (mirror, state) = (work.path().join("src"), work.path().join("state.json"));
    sync_mirror(one.path(), &mirror, &state, "one", &[]).unwrap();
    // The build of the first tree: its objects are newer than every source file.
    let built = std::time::SystemTime::now();
    sync_mirror(two.path(), &mirror, &state, "two", &[]).unwrap();
    let mtime = |rel: &str| std::fs::metadata(mirror.join(rel)).unwrap().modified().unwrap();
    assert_eq!(std::fs::read_to_string(mirror.join(rel)).unwrap(), "int x = 7;\n");
    assert!(mtime(rel) >= built, "a file whose content changed is newer than the objects");
    assert!(mtime("kernel/new.c") >= built, "and so is a new file");
    assert!(mtime("Kconfig") < built, "an unchanged file is not");
    use std::os::unix::fs::MetadataExt;
    let (linked, source) =
        (std::fs::metadata(mirror.join("Kconfig")).unwrap(), std::fs::metadata(two.path().join("Kconfig")).unwrap());
    assert_eq!(linked.ino(), source.ino(), "unchanged files are links into the tree switched to");
    assert_eq!(std::fs::read_to_string(one.path().join(rel)).unwrap(), "int x;\n", "the first tree untouched");
}

#[test]
fn another_patch_set_on_the_same_source_puts_back_only_what_the_last_one_touched() {
    let src = tempfile::tempdir().unwrap();
    kernel_like_tree(src.path());
    let work = tempfile::tempdir().unwrap();
    let (mirror, state) = (work.path().join("src"), work.path().join("state.json"));
    let patch_path = work.path().join("two.patch");
    std::fs::write(&patch_path, format!("{PATCH}--- /dev/null\n+++ b/kernel/made.c\n@@ -0,0 +1 @@\n+int m;\n"))
        .unwrap();
    let patch = Patch::read(&patch_path).unwrap();
    sync_mirror(src.path(), &mirror, &state, "id1", std::slice::from_ref(&patch)).unwrap();
    assert!(mirror.join("kernel/made.c").is_file());
    // A stray file only a whole sync would delete shows whether one ran.
    std::fs::write(mirror.join("stray"), "x").unwrap();
    sync_mirror(src.path(), &mirror, &state, "id1", &[]).unwrap();
    assert!(mirror.join("stray").exists(), "no whole sync");
    assert!(!mirror.join("kernel/made.c").exists(), "the file the patch made is gone");
    assert_eq!(std::fs::read_to_string(mirror.join("kernel/trace/trace_events_user.c")).unwrap(), "int x;\n");
    let pristine = std::fs::metadata(src.path().join("Kconfig")).unwrap();
    let linked = std::fs::metadata(mirror.join("Kconfig")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(pristine.ino(), linked.ino(), "untouched files stay hard links");
}

#[test]
fn a_patch_that_does_not_apply_names_patch_file_and_hunk() {
    let src = tempfile::tempdir().unwrap();
    kernel_like_tree(src.path());
    std::fs::write(src.path().join("kernel/trace/trace_events_user.c"), "int y;\n").unwrap();
    let work = tempfile::tempdir().unwrap();
    let patch_path = work.path().join("bad.patch");
    std::fs::write(&patch_path, PATCH).unwrap();
    let patch = Patch::read(&patch_path).unwrap();
    let err = sync_mirror(src.path(), &work.path().join("m"), &work.path().join("s"), "id1", &[patch]).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("bad.patch"), "{msg}");
    assert!(msg.contains("kernel/trace/trace_events_user.c: Hunk #1 FAILED at 1"), "{msg}");
    assert_eq!(crate::support::exit::code_for(&err), 128);
}

#[test]
fn a_patch_for_a_missing_file_names_it() {
    let src = tempfile::tempdir().unwrap();
    kernel_like_tree(src.path());
    let work = tempfile::tempdir().unwrap();
    let patch_path = work.path().join("elsewhere.patch");
    std::fs::write(&patch_path, PATCH.replace("trace_events_user.c", "gone.c")).unwrap();
    let patch = Patch::read(&patch_path).unwrap();
    let err = sync_mirror(src.path(), &work.path().join("m"), &work.path().join("s"), "id1", &[patch]).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("elsewhere.patch does not apply: kernel/trace/gone.c: No file to patch"), "{msg}");
}

#[test]
fn touched_files_include_renames() {
    let out = "checking file a.c\nchecking file b.c (renamed from old/b.c)\nHunk #1 succeeded\n";
    assert_eq!(touched_files(out), ["a.c", "b.c", "old/b.c"]);
}
