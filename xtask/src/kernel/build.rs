//! One arch's kernel built: its cache key, a hit read back, else the private mirror synced,
//! a new build directory seeded from another profile's (`seed`), the build directory configured
//! (`configure`), the image made and checked again, and the
//! result installed with its provenance in the content-addressed cache (`install`); a user's
//! image taken as it is (`prebuilt`). The data it hands on is in `model`.

mod configure;
mod install;
mod make;
mod model;
mod prebuilt;
mod seed;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use crate::arch::Arch;
use crate::kernel::cache::{self, KeyInputs};
use crate::kernel::kconfig::{self, Missing};
use crate::kernel::knobs::Knobs;
use crate::kernel::source;
use crate::support::cmd::cmd;
use crate::support::exit::{error, Kind};
use crate::support::files::hex;
use crate::support::progress::{self, Task};
use configure::{check_config, configure, missing_error, Configured};
pub use install::reproducer;
use install::{install, load};
use make::Make;
use model::{file_name, host, location};
pub use model::{Built, Compiler, ConfigRecord, Job, Metadata, SourceRef, METADATA_SCHEMA};
pub use prebuilt::prebuilt;

/// A kernel's source mirror, synced to its source and patches, and the lock that keeps it so.
pub fn source_tree(src: &SourceRef) -> Result<(PathBuf, crate::support::files::Lock)> {
    let pristine = source::pristine_root(&src.spec, &src.identity, &src.cache_dir)?;
    let tree_dir = src.cache_dir.join("trees").join(location(&src.identity, &pristine));
    let lock = crate::support::files::Lock::acquire(&tree_dir.join("lock"))?;
    let mirror = tree_dir.join("src");
    source::sync_mirror(&pristine, &mirror, &tree_dir.join("state.json"), &src.identity.id, &src.patches)?;
    Ok((mirror, lock))
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
pub fn build(req: &Job) -> Result<Built> {
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

fn build_or_reuse(req: &Job) -> Result<Built> {
    let arch = req.arch;
    let compiler = compiler(arch, req.knobs)?;
    let key = key(req, &compiler);
    let store = req.cache_dir.join("kernels").join(arch.name).join(&key[..24]);
    if let Some(built) = cache_hit(req, &store)? {
        return Ok(built);
    }
    let source_ref = source_ref(req);

    let mut durations = BTreeMap::new();
    let t = Instant::now();
    // Unpacked (or exported) once; its release line names the mirror and the build directory.
    let pristine = source::pristine_root(req.spec, req.source, req.cache_dir)?;
    let location = location(req.source, &pristine);
    let tree_dir = req.cache_dir.join("trees").join(&location);
    let (mirror, _reading) = prepare_mirror(req, &pristine, &tree_dir)?;
    durations.insert("source".to_string(), t.elapsed().as_secs_f64());

    let build_dir = build_dir(req, &location, &compiler);
    std::fs::create_dir_all(&build_dir)?;
    // One build at a time in a build directory.
    let _building = crate::support::files::Lock::acquire(&build_dir.join("xtask-lock"))?;
    let t = Instant::now();
    // A configuration alone (`--config-only`) needs no objects.
    let seeded = if req.config_only { None } else { seed::seed(&build_dir, req.fragments, &compiler.version)? };
    if let Some(from) = seeded {
        durations.insert("seed".to_string(), t.elapsed().as_secs_f64());
        let from = from.file_name().unwrap_or_default().to_string_lossy().into_owned();
        progress::line(format!("{}: a new build directory, seeded from {from} (another profile's objects)", arch.name));
    }
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
    let mut metadata = new_metadata(req, key, compiler, config_record(effective, missing)?, (commands, durations));
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
    install(&store, (&build_dir, &mirror, &pristine), &mut metadata, req, t)?;
    let mut built = load(arch, &store)?.context("the freshly installed build cannot be read back")?;
    built.source = Some(source_ref);
    // Read back from the cache, but make ran.
    built.cache_hit = false;
    Ok(built)
}

/// The build's cache key: its inputs only (`cache::key`).
fn key(req: &Job, compiler: &Compiler) -> String {
    cache::key(&KeyInputs {
        arch: req.arch.name,
        source: req.source,
        patches: req.patches,
        fragments: req.fragments,
        compiler_version: &compiler.version,
        gcov_files: req.gcov_files,
        knobs: &req.knobs.key_fields(req.arch),
    })
}

/// A new build's provenance: the request's, with the build's key, compiler, configuration, and
/// the make commands and durations so far (its release is set once known).
fn new_metadata(
    req: &Job,
    key: String,
    compiler: Compiler,
    config: ConfigRecord,
    (make_commands, durations): (Vec<String>, BTreeMap<String, f64>),
) -> Metadata {
    let arch = req.arch;
    Metadata {
        schema: METADATA_SCHEMA,
        arch: arch.name.to_string(),
        key,
        source: req.source.clone(),
        patches: req.patches.to_vec(),
        kernelrelease: String::new(),
        compiler,
        config,
        make_commands,
        durations,
        built_at: jiff::Timestamp::now().to_string(),
        host: host(),
        image: file_name(arch.image_path),
        gcov_files: req.gcov_files.to_vec(),
        make_vars: req.knobs.key_fields(arch),
    }
}

/// Where the request's source came from, kept with its build.
fn source_ref(req: &Job) -> SourceRef {
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
fn cache_hit(req: &Job, store: &Path) -> Result<Option<Built>> {
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
fn prepare_mirror(req: &Job, pristine: &Path, tree_dir: &Path) -> Result<(PathBuf, crate::support::files::Lock)> {
    // The mirror belongs to one source location. It is synced under its lock held exclusively
    // and built from under the lock shared, so two arches of the same source and patches build
    // side by side, while a build of other patches waits until no build reads the mirror.
    let (lock_path, state) = (tree_dir.join("lock"), tree_dir.join("state.json"));
    let mirror = tree_dir.join("src");
    let task = Task::start(format!("{}: preparing source", req.arch.name));
    let reading = loop {
        let shared = crate::support::files::Lock::acquire_shared(&lock_path)?;
        if source::mirror_synced(pristine, &mirror, &state, &req.source.id, req.patches) {
            break shared;
        }
        drop(shared);
        let _writing = crate::support::files::Lock::acquire(&lock_path)?;
        source::sync_mirror(pristine, &mirror, &state, &req.source.id, req.patches)?;
    };
    task.finish(format!("{} with {} patch(es)", req.source.label, req.patches.len()));
    super::gcov::check_sources(&mirror, req.gcov_files)?;
    Ok((mirror, reading))
}

/// One persistent build directory per source location, arch, compiler and set of fragment
/// files (the profiles): editing a fragment or adding `--kconfig` options rebuilds
/// incrementally, while switching profiles does not thrash one directory.
fn build_dir(req: &Job, location: &str, compiler: &Compiler) -> PathBuf {
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

/// `make` of the arch's image, its command line and duration recorded in `metadata`; a
/// failure comes with the first errors of the log.
fn make_image(req: &Job, make: &Make, metadata: &mut Metadata, log: &mut std::fs::File, log_path: &Path) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
