//! The kernel phase: configure (tinyconfig + fragments via `merge_config.sh`, then
//! `olddefconfig`), check that every requested option survived, build out of tree, and store
//! the result with its provenance in the content-addressed cache.

mod make;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::arch::Arch;
use crate::kernel::cache::{self, KeyInputs};
use crate::kernel::kconfig::{self, Fragment, Missing};
use crate::kernel::knobs::{shell_line, Knobs};
use crate::kernel::source::{self, Identity, Patch, Spec};
use crate::support::cmd::cmd;
use crate::support::exit::{error, Kind};
use crate::support::files::{hex, sha256_hex};
use crate::support::progress::{self, Task};
use make::{run_logged, Make};

pub const METADATA_SCHEMA: u32 = 1;

/// What to build.
pub struct Request<'a> {
    pub arch: &'static Arch,
    pub spec: &'a Spec,
    pub source: &'a Identity,
    pub patches: &'a [Patch],
    /// In merge order: common, arch, profiles, user fragments, `--kconfig`.
    pub fragments: &'a [Fragment],
    pub jobs: usize,
    pub cache_dir: &'a Path,
    /// Stop after the configuration check (no image, nothing cached).
    pub config_only: bool,
    /// Sources built with GCOV (`gcov.rs`); empty for a normal build.
    pub gcov_files: &'a [String],
    /// `LLVM=1`, `CC=`, `CROSS_COMPILE=`, ccache, extra make variables (`knobs.rs`).
    pub knobs: &'a Knobs,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Compiler {
    pub command: String,
    pub version: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConfigRecord {
    /// SHA-256 of the final `.config`.
    pub sha256: String,
    pub fragments: Vec<String>,
    pub requested: BTreeMap<String, String>,
    /// The final value of each requested option (`absent` when not in `.config`).
    pub effective: BTreeMap<String, String>,
    pub missing: Vec<Missing>,
}

/// Provenance of one build, written as `metadata.json` beside the image.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Metadata {
    pub schema: u32,
    pub arch: String,
    pub key: String,
    pub source: Identity,
    pub patches: Vec<Patch>,
    pub kernelrelease: String,
    pub compiler: Compiler,
    pub config: ConfigRecord,
    pub make_commands: Vec<String>,
    /// Seconds per phase: source, configure, build, install.
    pub durations: BTreeMap<String, f64>,
    pub built_at: String,
    pub host: String,
    /// The image file name inside the build's directory.
    pub image: String,
    /// The sources built with GCOV, their `.gcno` and source in `gcov/` beside the image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gcov_files: Vec<String>,
    /// The make variables of the build knobs (`ARCH=...`, `LLVM=1`, `CC=ccache gcc`, extra
    /// `--make-arg`s); absent for a build without knobs, whose variables are the arch's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub make_vars: Vec<String>,
}

/// A kernel ready to boot.
#[derive(Debug)]
pub struct Built {
    pub arch: &'static Arch,
    pub image: PathBuf,
    pub config: PathBuf,
    pub metadata: Metadata,
    /// True when no `make` ran at all.
    pub cache_hit: bool,
    /// Where the source came from, to bring its mirror back (`None` for a prebuilt image).
    pub source: Option<SourceRef>,
}

/// Enough to rebuild a kernel's private mirror: the upstream selftests must be built from the
/// very tree (source and patches) the kernel was, and on a cache hit nothing synced it.
#[derive(Debug, Clone)]
pub struct SourceRef {
    pub spec: Spec,
    pub identity: Identity,
    pub patches: Vec<Patch>,
    pub cache_dir: PathBuf,
}

/// A kernel's source mirror, synced to its source and patches, and the lock that keeps it so.
pub fn source_tree(src: &SourceRef) -> Result<(PathBuf, crate::support::files::Lock)> {
    let tree_dir = src.cache_dir.join("trees").join(location(&src.identity));
    let lock = crate::support::files::Lock::acquire(&tree_dir.join("lock"))?;
    let pristine = source::pristine_root(&src.spec, &src.identity, &src.cache_dir)?;
    let mirror = tree_dir.join("src");
    source::sync_mirror(&pristine, &mirror, &tree_dir.join("state.json"), &src.identity.id, &src.patches)?;
    Ok((mirror, lock))
}

fn location(source: &Identity) -> String {
    sha256_hex(format!("{}\0{}", source.kind, source.location.display()))[..16].to_string()
}

/// What a build directory's configuration was made from: the source, the fragments' contents
/// and every Kconfig or Makefile file the patch set changed, with its content.
fn config_inputs(req: &Request, frag_paths: &[PathBuf], mirror: &Path, state_file: &Path) -> Result<String> {
    let mut h = Sha256::new();
    h.update(req.source.id.as_bytes());
    for v in req.knobs.key_fields(req.arch) {
        h.update(b"\0make-var\0");
        h.update(v.as_bytes());
    }
    for f in frag_paths {
        h.update(b"\0fragment\0");
        h.update(std::fs::read(f).with_context(|| format!("reading {}", f.display()))?);
    }
    let mut touched = source::patched_files(state_file);
    touched.sort();
    for rel in touched.iter().filter(|r| kconfig_input(r)) {
        h.update(b"\0patched\0");
        h.update(rel.as_bytes());
        h.update(b"\0");
        h.update(std::fs::read(mirror.join(rel)).unwrap_or_default());
    }
    Ok(hex(&h.finalize()))
}

/// Whether a source file can change what `make *config` produces.
fn kconfig_input(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name.starts_with("Kconfig")
        || name.starts_with("Makefile")
        || name.starts_with("Kbuild")
        || name.ends_with(".config")
        || rel.starts_with("scripts/kconfig/")
}

pub fn compiler(arch: &Arch, knobs: &Knobs) -> Result<Compiler> {
    let command = knobs.compiler(arch);
    let version = crate::support::cmd::sh().and_then(|sh| crate::support::cmd::text(cmd!(sh, "{command} --version")));
    match version {
        Ok(v) => Ok(Compiler { version: v.lines().next().unwrap_or("").trim().to_string(), command }),
        Err(_) => Err(error(
            Kind::Infra,
            format!(
                "`{command}` not found: install the Debian package {} (`cargo xtask setup` does)",
                arch.compiler_package
            ),
        )),
    }
}

/// Builds (or finds in the cache) the kernel for one arch; the phases of a build it made are
/// recorded for the run's timings.
pub fn build(req: &Request) -> Result<Built> {
    let built = build_or_reuse(req)?;
    record_phases(&built);
    Ok(built)
}

/// The kernel phases of a build this invocation made (nothing for a cache hit, whose
/// metadata holds the durations of the build that made it).
fn record_phases(built: &Built) {
    if built.cache_hit {
        return;
    }
    let d = &built.metadata.durations;
    let secs = |k: &str| d.get(k).copied().unwrap_or(0.0);
    for (phase, s) in
        [("source", secs("source")), ("configure", secs("configure")), ("build", secs("build") + secs("install"))]
    {
        crate::support::timings::record(Some(built.arch.name), phase, std::time::Duration::from_secs_f64(s));
    }
}

fn build_or_reuse(req: &Request) -> Result<Built> {
    let arch = req.arch;
    let compiler = compiler(arch, req.knobs)?;
    let knob_vars = req.knobs.key_fields(arch);
    let key = cache::key(&KeyInputs {
        arch: arch.name,
        source: req.source,
        patches: req.patches,
        fragments: req.fragments,
        compiler_version: &compiler.version,
        gcov_files: req.gcov_files,
        knobs: &knob_vars,
    });
    let store = req.cache_dir.join("kernels").join(arch.name).join(&key[..24]);
    if let Some(built) = cache_hit(req, &store)? {
        return Ok(built);
    }
    let source_ref = source_ref(req);

    let location = location(req.source);
    let tree_dir = req.cache_dir.join("trees").join(&location);
    let mut durations = BTreeMap::new();

    let t = Instant::now();
    let (mirror, _reading) = prepare_mirror(req, &tree_dir)?;
    durations.insert("source".to_string(), t.elapsed().as_secs_f64());

    let build_dir = build_dir(req, &location, &compiler);
    std::fs::create_dir_all(&build_dir)?;
    // One build at a time in a build directory.
    let _building = crate::support::files::Lock::acquire(&build_dir.join("xtask-lock"))?;
    let log_path = build_dir.join("build.log");
    let mut log = std::fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let make = Make {
        vars: [req.knobs.make_vars(arch), super::gcov::make_vars(req.gcov_files)].concat(),
        srctree: &mirror,
        out: &build_dir,
    };

    let t = Instant::now();
    let requested = kconfig::merged_requests(req.fragments)?;
    let Configured { commands, effective, missing } = configure(req, &make, &requested, &tree_dir, &mut log)?;
    let config_path = build_dir.join(".config");
    durations.insert("configure".to_string(), t.elapsed().as_secs_f64());
    if !missing.is_empty() {
        return Err(missing_error(arch, "after olddefconfig", &missing, &config_path));
    }

    let config_record = |effective: BTreeMap<String, String>, missing: Vec<Missing>| -> Result<ConfigRecord> {
        Ok(ConfigRecord {
            sha256: crate::support::files::sha256_file(&config_path)?,
            fragments: req.fragments.iter().map(|f| f.name.clone()).collect(),
            requested: requested.iter().map(|(k, r)| (k.clone(), r.value.clone())).collect(),
            effective,
            missing,
        })
    };
    let mut metadata = Metadata {
        schema: METADATA_SCHEMA,
        arch: arch.name.to_string(),
        key: key.clone(),
        source: req.source.clone(),
        patches: req.patches.to_vec(),
        kernelrelease: String::new(),
        compiler,
        config: config_record(effective, missing)?,
        make_commands: commands,
        durations,
        built_at: jiff::Timestamp::now().to_string(),
        host: host(),
        image: file_name(arch.image_path),
        gcov_files: req.gcov_files.to_vec(),
        make_vars: knob_vars.clone(),
    };
    if req.config_only {
        // The release the suites' `requires.kernel` are decided against (`--list`).
        metadata.kernelrelease = make.capture(&["-s", "kernelrelease"])?.trim().to_string();
        let (image, source) = (PathBuf::new(), Some(source_ref));
        return Ok(Built { arch, image, config: config_path, metadata, cache_hit: false, source });
    }

    make_image(req, &make, &mut metadata, &mut log, &log_path)?;

    // The build may rewrite .config (syncconfig); check the options again.
    let (effective, missing) = check_config(&config_path, &requested, &mirror, arch)?;
    if !missing.is_empty() {
        return Err(missing_error(arch, "after the build", &missing, &config_path));
    }
    metadata.config = config_record(effective, missing)?;
    let release = make.capture(&["-s", "kernelrelease"])?;
    metadata.kernelrelease = release.trim().to_string();

    let t = Instant::now();
    install(&store, &build_dir, &mut metadata, req, t)?;
    let mut built = load(arch, &store)?.context("the freshly installed build cannot be read back")?;
    built.source = Some(source_ref);
    // Read back from the cache, but make ran.
    built.cache_hit = false;
    Ok(built)
}

/// Where the request's source came from, kept with its build.
fn source_ref(req: &Request) -> SourceRef {
    SourceRef {
        spec: req.spec.clone(),
        identity: req.source.clone(),
        patches: req.patches.to_vec(),
        cache_dir: req.cache_dir.to_path_buf(),
    }
}

/// The build in the cache at `store`, if there is one, said as a hit. A hit serves
/// `--config-only` too: the key covers every input of the configuration, and the cached
/// build's options were checked twice when it was made.
fn cache_hit(req: &Request, store: &Path) -> Result<Option<Built>> {
    let Some(mut built) = load(req.arch, store)? else { return Ok(None) };
    built.source = Some(source_ref(req));
    progress::line(format!(
        "{}: cache hit, {} ({})",
        req.arch.name,
        built.metadata.kernelrelease,
        built.image.display()
    ));
    Ok(Some(built))
}

/// The private mirror of the source with the request's patches, synced if it is not, and its
/// lock held shared while the build reads it (the guard, to keep until the build is done).
fn prepare_mirror(req: &Request, tree_dir: &Path) -> Result<(PathBuf, crate::support::files::Lock)> {
    // The mirror belongs to one source location. It is synced under its lock held exclusively
    // and built from under the lock shared, so two arches of the same source and patches build
    // side by side, while a build of other patches waits until no build reads the mirror.
    let (lock_path, state) = (tree_dir.join("lock"), tree_dir.join("state.json"));
    let pristine = source::pristine_root(req.spec, req.source, req.cache_dir)?;
    let mirror = tree_dir.join("src");
    let task = Task::start(format!("{}: preparing source", req.arch.name));
    let reading = loop {
        let shared = crate::support::files::Lock::acquire_shared(&lock_path)?;
        if source::mirror_synced(&pristine, &mirror, &state, &req.source.id, req.patches) {
            break shared;
        }
        drop(shared);
        let _writing = crate::support::files::Lock::acquire(&lock_path)?;
        source::sync_mirror(&pristine, &mirror, &state, &req.source.id, req.patches)?;
    };
    task.finish(format!("{} with {} patch(es)", req.source.label, req.patches.len()));
    super::gcov::check_sources(&mirror, req.gcov_files)?;
    Ok((mirror, reading))
}

/// One persistent build directory per source location, arch, compiler and set of fragment
/// files (the profiles): editing a fragment or adding `--kconfig` options rebuilds
/// incrementally, while switching profiles does not thrash one directory.
fn build_dir(req: &Request, location: &str, compiler: &Compiler) -> PathBuf {
    let config_id = {
        let mut h = Sha256::new();
        for f in req.fragments.iter().filter(|f| f.name != kconfig::CLI_FRAGMENT) {
            h.update(f.name.as_bytes());
            h.update(b"\0");
        }
        h.update(compiler.version.as_bytes());
        if !req.knobs.is_default() {
            h.update(req.knobs.toolchain_id().as_bytes());
        }
        hex(&h.finalize())
    };
    req.cache_dir.join("build").join(format!("{}-{location}-{}", req.arch.name, &config_id[..12]))
}

/// The `.config` of the build directory from the fragments (tinyconfig, merge_config.sh,
/// olddefconfig), unless no Kconfig input changed since it was made; the make commands that
/// made it, and the requested options as set and as missed.
fn configure(
    req: &Request,
    make: &Make,
    requested: &BTreeMap<String, kconfig::Request>,
    tree_dir: &Path,
    log: &mut std::fs::File,
) -> Result<Configured> {
    let (mirror, build_dir) = (make.srctree, make.out);
    let frag_paths = write_fragments(&build_dir.join("xtask-fragments"), req.fragments)?;
    let task = Task::start(format!("{}: configuring", req.arch.name));
    let config_path = build_dir.join(".config");
    let mut commands = vec![make.command_line(&["tinyconfig"])];
    // The configuration depends on the fragments, the source, and the Kconfig and Makefile
    // files a patch changes: when none of that changed since this directory was configured, its
    // .config stands (a one-file patch to a .c file skips tinyconfig, merge and olddefconfig).
    // The requested options are still checked, here and after the build.
    let inputs = config_inputs(req, &frag_paths, mirror, &tree_dir.join("state.json"))?;
    let stamp = build_dir.join("xtask-configured");
    let configured = config_path.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == inputs);
    if configured {
        commands.push("(tinyconfig, merge_config.sh and olddefconfig skipped: no Kconfig input changed)".into());
    } else {
        let _ = std::fs::remove_file(&stamp);
        make.run(&["tinyconfig"], log, None)?;
        let merge = mirror.join("scripts/kconfig/merge_config.sh");
        let mut merge_cmd = Command::new("sh");
        merge_cmd.arg(&merge).arg("-m").arg("-O").arg(build_dir).arg(build_dir.join(".config"));
        merge_cmd.args(&frag_paths).current_dir(build_dir);
        commands.push(format!(
            "(cd {} && sh {} -m -O {} {}/.config {})",
            build_dir.display(),
            merge.display(),
            build_dir.display(),
            build_dir.display(),
            frag_paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" ")
        ));
        run_logged(merge_cmd, log, None).context("merging config fragments with merge_config.sh")?;
        commands.push(make.command_line(&["olddefconfig"]));
        make.run(&["olddefconfig"], log, None)?;
        crate::support::files::write_atomic(&stamp, inputs.as_bytes())?;
    }
    let (effective, missing) = check_config(&config_path, requested, mirror, req.arch)?;
    let how = if configured { ", configuration reused" } else { "" };
    task.finish(format!("{} of {} requested options set{how}", requested.len() - missing.len(), requested.len()));
    Ok(Configured { commands, effective, missing })
}

/// A configured build directory: the make commands that configured it, and the requested
/// options as they are set and as they were missed.
struct Configured {
    commands: Vec<String>,
    effective: BTreeMap<String, String>,
    missing: Vec<Missing>,
}

/// `make` of the arch's image, its command line and duration recorded in `metadata`; a
/// failure comes with the first errors of the log.
fn make_image(
    req: &Request,
    make: &Make,
    metadata: &mut Metadata,
    log: &mut std::fs::File,
    log_path: &Path,
) -> Result<()> {
    let arch = req.arch;
    let t = Instant::now();
    let mut task = Task::start(format!("{}: building {}", arch.name, arch.image_target));
    let jobs = format!("-j{}", req.jobs);
    metadata.make_commands.push(make.command_line(&[&jobs, arch.image_target]));
    let result = make.run(&[&jobs, arch.image_target], log, Some(&mut task));
    if let Err(e) = result {
        drop(task);
        return Err(build_failure(arch, log_path, e));
    }
    task.finish("done");
    metadata.durations.insert("build".to_string(), t.elapsed().as_secs_f64());
    Ok(())
}

fn write_fragments(dir: &Path, fragments: &[Fragment]) -> Result<Vec<PathBuf>> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    let mut paths = Vec::new();
    for (i, f) in fragments.iter().enumerate() {
        let path = dir.join(format!("{:02}-{}", i + 1, f.name));
        std::fs::write(&path, &f.text)?;
        paths.push(path);
    }
    Ok(paths)
}

type Checked = (BTreeMap<String, String>, Vec<Missing>);

fn check_config(
    config_path: &Path,
    requested: &BTreeMap<String, kconfig::Request>,
    srctree: &Path,
    arch: &Arch,
) -> Result<Checked> {
    let text = std::fs::read_to_string(config_path).with_context(|| format!("reading {}", config_path.display()))?;
    let config = kconfig::parse_config(&text);
    let mut missing = kconfig::check(requested, &config);
    for m in &mut missing {
        m.why = Some(kconfig::explain(srctree, arch.linux_arch, &m.option, &config));
    }
    let effective =
        requested.keys().map(|k| (k.clone(), config.get(k).cloned().unwrap_or_else(|| "absent".into()))).collect();
    Ok((effective, missing))
}

fn missing_error(arch: &Arch, when: &str, missing: &[Missing], config: &Path) -> anyhow::Error {
    let mut lines: Vec<String> = missing.iter().map(|m| format!("  - {m}")).collect();
    let pre_6_4 = missing
        .iter()
        .any(|m| m.option == "CONFIG_USER_EVENTS" && m.why.as_deref().is_some_and(|w| w.contains("BROKEN")));
    if pre_6_4 {
        lines.push(
            "verdict: this kernel predates the user_events ABI of 6.4 (there CONFIG_USER_EVENTS depends on BROKEN, \
             and the original status-page design it carries is not what the suites test): nothing to build or boot"
                .to_string(),
        );
    }
    error(
        Kind::CannotBuild,
        format!(
            "{}: {} requested option(s) did not survive {when} (final config: {}):\n{}",
            arch.name,
            missing.len(),
            config.display(),
            lines.join("\n")
        ),
    )
}

/// The first compiler and make error lines of a failed build, with the log's path.
fn build_failure(arch: &Arch, log_path: &Path, cause: anyhow::Error) -> anyhow::Error {
    let text = std::fs::read_to_string(log_path).unwrap_or_default();
    let errors: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("error:") || l.contains("Error ") || l.contains("undefined reference"))
        .take(12)
        .collect();
    let shown = if errors.is_empty() {
        text.lines().rev().take(12).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    } else {
        errors.join("\n")
    };
    error(
        Kind::CannotBuild,
        format!(
            "{}: the kernel build failed ({cause:#})\n==== first errors ====\n{shown}\n==== full log: {} ====",
            arch.name,
            log_path.display()
        ),
    )
}

/// Copies the build's outputs and provenance into the store directory, atomically.
fn install(store: &Path, build_dir: &Path, metadata: &mut Metadata, req: &Request, started: Instant) -> Result<()> {
    let parent = store.parent().context("store has no parent")?;
    std::fs::create_dir_all(parent)?;
    let tmp = tempfile::Builder::new().prefix(".install-").tempdir_in(parent)?;
    let arch = req.arch;
    let copy = |from: &Path, to: &str| -> Result<()> {
        std::fs::copy(from, tmp.path().join(to)).with_context(|| format!("copying {}", from.display()))?;
        Ok(())
    };
    copy(&build_dir.join(arch.image_path), &metadata.image)?;
    copy(&build_dir.join(".config"), "config")?;
    copy(&build_dir.join("System.map"), "System.map")?;
    copy(&build_dir.join("vmlinux"), "vmlinux")?;
    copy(&build_dir.join("build.log"), "build.log")?;
    let mirror = req.cache_dir.join("trees").join(location(req.source)).join("src");
    let pristine = source::pristine_root(req.spec, req.source, req.cache_dir)?;
    super::gcov::keep(tmp.path(), build_dir, (&mirror, &pristine), req.gcov_files)?;
    let frag_dir = tmp.path().join("fragments");
    write_fragments(&frag_dir, req.fragments)?;
    std::fs::create_dir_all(tmp.path().join("patches"))?;
    for (i, p) in req.patches.iter().enumerate() {
        let name = format!("{:02}-{}", i + 1, file_name(&p.path.display().to_string()));
        std::fs::copy(&p.path, tmp.path().join("patches").join(name))?;
    }
    std::fs::write(tmp.path().join("reproducer.sh"), reproducer(metadata, arch))?;
    set_executable(&tmp.path().join("reproducer.sh"))?;
    metadata.durations.insert("install".to_string(), started.elapsed().as_secs_f64());
    std::fs::write(tmp.path().join("metadata.json"), serde_json::to_vec_pretty(metadata)?)?;
    if store.exists() {
        std::fs::remove_dir_all(store)?;
    }
    let kept = tmp.keep();
    std::fs::rename(&kept, store).with_context(|| format!("installing into {}", store.display()))?;
    Ok(())
}

fn set_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// Reads a stored build back; `None` when the store has no complete entry.
fn load(arch: &'static Arch, store: &Path) -> Result<Option<Built>> {
    let Ok(bytes) = std::fs::read(store.join("metadata.json")) else {
        return Ok(None);
    };
    let metadata: Metadata =
        serde_json::from_slice(&bytes).with_context(|| format!("reading {}", store.join("metadata.json").display()))?;
    let image = store.join(&metadata.image);
    if !image.is_file() {
        return Ok(None);
    }
    Ok(Some(Built { arch, image, config: store.join("config"), metadata, cache_hit: true, source: None }))
}

fn file_name(path: &str) -> String {
    Path::new(path).file_name().unwrap_or_default().to_string_lossy().into_owned()
}

fn host() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{} ({cores} cores)", name.trim())
}

/// A shell script that rebuilds the same kernel by hand from the files stored beside it.
pub fn reproducer(m: &Metadata, arch: &Arch) -> String {
    let knobs = if m.make_vars.is_empty() { arch.make_vars() } else { m.make_vars.clone() };
    let vars = shell_line(&[knobs, super::gcov::make_vars(&m.gcov_files)].concat());
    let mut s = String::new();
    s.push_str("#!/bin/sh\n");
    s.push_str(&format!(
        "# Rebuilds the {} kernel {} ({}) by hand, as `cargo xtask kernel` did.\n",
        m.arch, m.kernelrelease, m.source.label
    ));
    s.push_str("# Usage: sh reproducer.sh [WORKDIR]   (default: ./rebuild)\nset -eu\n");
    s.push_str("here=$(cd \"$(dirname \"$0\")\" && pwd)\nwork=${1:-$PWD/rebuild}\n");
    s.push_str(&format!("src=\"$work/src\"\nout=\"$work/build-{}\"\nmkdir -p \"$src\" \"$out\"\n", m.arch));
    match m.source.kind.as_str() {
        "debian-package" | "tarball" => {
            s.push_str(&format!(
                "# Source: {} (sha256 {}).\ntar -xf {} -C \"$src\" --strip-components=1\n",
                m.source.label,
                m.source.id,
                m.source.location.display()
            ));
        }
        _ => {
            if let Some(head) = &m.source.git_head {
                s.push_str(&format!("# Source: {} (commit {head}).\n", m.source.label));
            }
            if m.source.git_dirty == Some(true) {
                s.push_str("# The tree had uncommitted changes when it was built: they are copied as they are now.\n");
            }
            s.push_str(&format!("rsync -a --exclude=/.git {}/ \"$src\"/\n", m.source.location.display()));
        }
    }
    if !m.patches.is_empty() {
        s.push_str("for p in \"$here\"/patches/*; do patch -d \"$src\" -p1 --batch --forward < \"$p\"; done\n");
    }
    s.push_str(&format!("make -C \"$src\" O=\"$out\" {vars} tinyconfig\n"));
    s.push_str("(cd \"$out\" && sh \"$src\"/scripts/kconfig/merge_config.sh -m -O \"$out\" \"$out/.config\" \"$here\"/fragments/*)\n");
    s.push_str(&format!("make -C \"$src\" O=\"$out\" {vars} olddefconfig\n"));
    s.push_str(&format!("make -C \"$src\" O=\"$out\" {vars} -j\"$(nproc)\" {}\n", arch.image_target));
    s.push_str("if cmp -s \"$out/.config\" \"$here/config\"; then echo \"same .config as the cached build\"; else echo \".config differs from the cached build\" >&2; exit 1; fi\n");
    s.push_str(&format!("echo \"image: $out/{}\"\n", arch.image_path));
    s
}

/// A kernel the user built (`--kernel-image`): no build, but its arch and its configuration
/// are checked against what the suites need.
pub fn prebuilt(
    arch: &'static Arch,
    image: &Path,
    config: Option<&Path>,
    fragments: &[Fragment],
    srctree: Option<&Path>,
) -> Result<Built> {
    let bad = |msg: String| error(Kind::BadInput, msg);
    let bytes = std::fs::read(image).map_err(|e| bad(format!("--kernel-image {}: {e}", image.display())))?;
    match super::image::arch(&bytes) {
        Some(found) if found == arch.name => {}
        Some(found) => {
            return Err(bad(format!("--kernel-image {} is an {found} kernel, not {}", image.display(), arch.name)))
        }
        None => {
            return Err(bad(format!(
                "--kernel-image {}: not a bootable {} image (expected {}, uncompressed)",
                image.display(),
                arch.name,
                arch.image_path
            )))
        }
    }
    let config_path = match config {
        Some(c) => c.to_path_buf(),
        None => {
            let beside = image.parent().unwrap_or(Path::new(".")).join(".config");
            // An image inside a build tree (arch/*/boot/) has its .config at the tree's top.
            let top = image.ancestors().nth(4).map(|t| t.join(".config"));
            [Some(beside), top].into_iter().flatten().find(|p| p.is_file()).ok_or_else(|| {
                bad(format!("--kernel-image {}: no .config beside it; pass --kernel-config FILE", image.display()))
            })?
        }
    };
    let text = std::fs::read_to_string(&config_path)
        .map_err(|e| bad(format!("--kernel-config {}: {e}", config_path.display())))?;
    let parsed = kconfig::parse_config(&text);
    let mut requested = kconfig::merged_requests(fragments)?;
    requested.retain(|option, _| !kconfig::BUILD_CHOICES.contains(&option.as_str()));
    let mut missing = kconfig::check(&requested, &parsed);
    for m in &mut missing {
        m.why = Some(match srctree {
            Some(src) => kconfig::explain(src, arch.linux_arch, &m.option, &parsed),
            None => "pass --kernel-src to see its unmet dependencies".into(),
        });
    }
    if !missing.is_empty() {
        let lines: Vec<String> = missing.iter().map(|m| format!("  - {m}")).collect();
        return Err(bad(format!(
            "--kernel-image {}: its config {} lacks {} option(s) the suites need:\n{}",
            image.display(),
            config_path.display(),
            missing.len(),
            lines.join("\n")
        )));
    }
    let image = image.canonicalize()?;
    let sha = crate::support::files::sha256_file(&image)?;
    let metadata = Metadata {
        schema: METADATA_SCHEMA,
        arch: arch.name.to_string(),
        key: sha.clone(),
        source: Identity {
            kind: "prebuilt".into(),
            label: format!("prebuilt image {}", image.display()),
            id: sha,
            location: image.clone(),
            git_head: None,
            git_dirty: None,
            package_version: None,
        },
        patches: vec![],
        kernelrelease: super::image::release(&bytes).unwrap_or_else(|| "unknown".into()),
        compiler: Compiler { command: "unknown".into(), version: "unknown".into() },
        config: ConfigRecord {
            sha256: crate::support::files::sha256_file(&config_path)?,
            fragments: fragments.iter().map(|f| f.name.clone()).collect(),
            requested: requested.iter().map(|(k, r)| (k.clone(), r.value.clone())).collect(),
            effective: requested
                .keys()
                .map(|k| (k.clone(), parsed.get(k).cloned().unwrap_or_else(|| "absent".into())))
                .collect(),
            missing: vec![],
        },
        make_commands: vec![],
        durations: BTreeMap::new(),
        built_at: String::new(),
        host: host(),
        image: file_name(&image.display().to_string()),
        gcov_files: vec![],
        make_vars: vec![],
    };
    progress::line(format!("{}: using prebuilt {} ({})", arch.name, image.display(), metadata.kernelrelease));
    Ok(Built { arch, image, config: config_path, metadata, cache_hit: true, source: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kconfig_inputs_are_recognised() {
        for yes in [
            "kernel/trace/Kconfig",
            "Makefile",
            "arch/x86/Makefile.um",
            "init/Kconfig.debug",
            "Kbuild",
            "arch/arm64/configs/defconfig.config",
            "scripts/kconfig/conf.c",
        ] {
            assert!(kconfig_input(yes), "{yes}");
        }
        for no in
            ["kernel/trace/trace_events_user.c", "include/linux/trace_events.h", "Documentation/Makefile.rst.txt/x"]
        {
            assert!(!kconfig_input(no), "{no}");
        }
    }

    #[test]
    fn a_failed_build_shows_its_first_errors_and_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("build.log");
        std::fs::write(
            &log,
            "  CC      kernel/trace/trace_events_user.o\n\
             kernel/trace/trace_events_user.c:42:1: error: expected ';' before 'int'\n\
             make[4]: *** [scripts/Makefile.build:229: kernel/trace/trace_events_user.o] Error 1\n\
             make: *** [Makefile:224: __sub-make] Error 2\n",
        )
        .unwrap();
        let x86 = crate::arch::select("x86_64").unwrap()[0];
        let err = build_failure(x86, &log, anyhow::anyhow!("make failed"));
        let msg = err.to_string();
        assert!(msg.contains("trace_events_user.c:42:1: error: expected ';'"), "{msg}");
        assert!(msg.contains(&format!("full log: {}", log.display())), "{msg}");
        assert!(!msg.contains("  CC "), "only error lines are shown: {msg}");
        assert_eq!(crate::support::exit::code_for(&err), 125);
    }

    #[test]
    fn prebuilt_checks_arch_and_config() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("bzImage");
        std::fs::write(&image, super::super::image::tests::x86_header("6.12.0")).unwrap();
        let frags = [
            Fragment { name: "common.config".into(), text: "CONFIG_USER_EVENTS=y\n".into() },
            // A build choice: a user's image compressed otherwise is accepted.
            Fragment { name: "x86_64.config".into(), text: "CONFIG_KERNEL_LZ4=y\n".into() },
        ];
        let x86 = crate::arch::select("x86_64").unwrap()[0];
        let arm = crate::arch::select("arm64").unwrap()[0];

        let err = prebuilt(x86, &image, None, &frags, None).unwrap_err().to_string();
        assert!(err.contains("no .config beside it"), "{err}");
        std::fs::write(dir.path().join(".config"), "# CONFIG_USER_EVENTS is not set\n").unwrap();
        let err = prebuilt(x86, &image, None, &frags, None).unwrap_err().to_string();
        assert!(err.contains("CONFIG_USER_EVENTS: asked for `y`"), "{err}");
        let err = prebuilt(arm, &image, None, &frags, None).unwrap_err().to_string();
        assert!(err.contains("is an x86_64 kernel, not arm64"), "{err}");

        std::fs::write(dir.path().join(".config"), "CONFIG_USER_EVENTS=y\nCONFIG_KERNEL_GZIP=y\n").unwrap();
        let built = prebuilt(x86, &image, None, &frags, None).unwrap();
        assert_eq!(built.metadata.kernelrelease, "6.12.0");
        assert_eq!(built.metadata.config.effective["CONFIG_USER_EVENTS"], "y");
    }

    #[test]
    fn reproducer_rebuilds_from_stored_files() {
        let arm = crate::arch::select("arm64").unwrap()[0];
        let m = Metadata {
            schema: 1,
            arch: "arm64".into(),
            key: "k".into(),
            source: Identity {
                kind: "debian-package".into(),
                label: "Debian linux-source-6.12".into(),
                id: "abc".into(),
                location: "/usr/src/linux-source-6.12.tar.xz".into(),
                git_head: None,
                git_dirty: None,
                package_version: None,
            },
            patches: vec![Patch { path: "/p/fix.patch".into(), sha256: "00".into() }],
            kernelrelease: "6.12.117".into(),
            compiler: Compiler { command: "aarch64-linux-gnu-gcc".into(), version: "12".into() },
            config: ConfigRecord {
                sha256: String::new(),
                fragments: vec![],
                requested: BTreeMap::new(),
                effective: BTreeMap::new(),
                missing: vec![],
            },
            make_commands: vec![],
            durations: BTreeMap::new(),
            built_at: String::new(),
            host: String::new(),
            image: "Image".into(),
            gcov_files: vec![],
            make_vars: vec![],
        };
        let s = reproducer(&m, arm);
        assert!(s.contains("tar -xf /usr/src/linux-source-6.12.tar.xz"), "{s}");
        assert!(s.contains("patch -d \"$src\" -p1"), "{s}");
        assert!(s.contains("ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- -j\"$(nproc)\" Image"), "{s}");
        assert!(s.contains("merge_config.sh -m"), "{s}");
        // A build with knobs rebuilds with its recorded make variables, quoted for the shell.
        let knobs = Knobs { llvm: true, make_args: vec![("KCFLAGS".into(), "-O2 -g".into())], ..Knobs::default() };
        let s = reproducer(&Metadata { make_vars: knobs.make_vars(arm), ..m }, arm);
        assert!(s.contains("CROSS_COMPILE=aarch64-linux-gnu- LLVM=1 'KCFLAGS=-O2 -g' -j\"$(nproc)\" Image"), "{s}");
    }
}
