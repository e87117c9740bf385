//! `validate`'s two sides: the flags name a change, and the baseline's and the patched
//! kernel's flags are made from them (`--patch`, or `--base`/`--head` in a git tree).

use std::path::PathBuf;

use anyhow::Result;

use crate::cli::{KernelArgs, ValidateArgs};
use crate::support::exit::{error, Kind};
use crate::support::progress::line;

/// The flags name a change to validate, on a source that can be patched.
pub fn needs_a_change(args: &ValidateArgs) -> Result<()> {
    let src = &args.kernel.source;
    if src.patches.is_empty() && args.base.is_none() {
        return Err(error(
            Kind::BadInput,
            "validate needs the change to validate: --patch FILE, or --kernel-src TREE --base REF [--head REF]",
        ));
    }
    if args.head.is_some() && args.base.is_none() {
        return Err(error(Kind::BadInput, "--head REF goes with --base REF"));
    }
    if src.kernel_image.is_some() {
        return Err(error(Kind::BadInput, "validate builds from source: --kernel-image cannot be patched"));
    }
    Ok(())
}

/// The two sides' kernel flags and what each is. With `--patch` only: the source without and
/// with the patches. With `--base REF`: that commit of the `--kernel-src` git tree, exported
/// into the cache, against the same export plus the change to `--head REF` (or to the working
/// tree, uncommitted and untracked files included) as a patch, so the second side is an
/// incremental build of the first in one private mirror; `--patch` files apply on top of both.
pub fn sides(args: &ValidateArgs) -> Result<(KernelArgs, KernelArgs, String, String)> {
    let src = &args.kernel.source;
    let patch_names = || src.patches.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    let Some(base_ref) = &args.base else {
        let mut base = args.kernel.clone();
        base.source.patches.clear();
        return Ok((
            base,
            args.kernel.clone(),
            "the source without the patches".into(),
            format!("patched with {}", patch_names()),
        ));
    };
    let dir = src.kernel_src.as_ref().ok_or_else(|| {
        error(
            Kind::BadInput,
            "--base REF needs --kernel-src TREE (or to run inside it), the git checkout REF belongs to",
        )
    })?;
    let cache_dir = crate::kernel::cache::root(args.kernel.cache_dir.as_deref());
    let repo = crate::kernel::git::repo(dir)?;
    let base_commit = crate::kernel::git::commit(&repo, base_ref, "--base")?;
    let head_commit = args.head.as_deref().map(|h| crate::kernel::git::commit(&repo, h, "--head")).transpose()?;
    let change = crate::kernel::git::diff_patch(&repo, &base_commit, head_commit.as_deref(), &cache_dir)?;
    let head_label = match &head_commit {
        Some(h) => crate::kernel::git::describe(&repo, h),
        None if crate::kernel::git::dirty(&repo) => {
            format!("{} with the working tree's uncommitted changes", crate::kernel::git::describe(&repo, "HEAD"))
        }
        None => crate::kernel::git::describe(&repo, "HEAD"),
    };
    if change.is_none() {
        line(format!("validate: no change between {base_ref} and {head_label}: both sides are the same kernel"));
    }
    let with = |extra: Option<&PathBuf>| {
        let mut k = args.kernel.clone();
        k.source.kernel_src = None;
        k.source.git_commit = Some((repo.clone(), base_commit.clone()));
        k.source.patches = extra.into_iter().cloned().chain(src.patches.iter().cloned()).collect();
        k
    };
    let extra = if src.patches.is_empty() { String::new() } else { format!(", plus {}", patch_names()) };
    Ok((
        with(None),
        with(change.as_ref()),
        format!("{}{extra}", crate::kernel::git::describe(&repo, &base_commit)),
        format!("{head_label}{extra}"),
    ))
}
