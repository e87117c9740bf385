//! `cargo xtask mutants --tce ARCHES`: trivial compiler equivalence on the default kernel of
//! each arch (built if need be): the original file and each selected mutant compiled with the
//! build's own command line (`mutants::tce`), two at a time, the findings kept in
//! `<out>/tce.json` and summed up. A proof holds for that kernel's configuration only (a removed
//! `rcu_read_unlock()` compiles to nothing without lockdep and preemption), so plans do not take
//! it as equivalence; `--recheck-equivalents` says which listed entries it also proves.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{Context, Result};
use clap::Parser;

use crate::cli::{Cmd, Xtask};
use crate::mutants::mutant::Mutant;
use crate::mutants::tce::{self, Compiler, Finding, Record};
use crate::support::exit::{error, Kind};

/// The record's file name in the results folder.
pub const TCE_JSON: &str = "tce.json";

/// The mutants `<out>/tce.json` proves equivalent for the file whose digest is `digest` (none
/// when there is no record, or it is another text's), on the configuration TCE compiled with.
pub fn proven(out: &Path, digest: &str) -> BTreeMap<String, String> {
    load(out, digest).map(|r| r.proven()).unwrap_or_default()
}

/// `<out>/tce.json` when it is the record of the file text whose digest is `digest`.
fn load(out: &Path, digest: &str) -> Option<Record> {
    std::fs::read(out.join(TCE_JSON))
        .ok()
        .and_then(|b| serde_json::from_slice::<Record>(&b).ok())
        .filter(|r| r.digest == digest)
}

/// Runs TCE on `arches` for the selected `mutants` of `file` (its `text`, after `base`
/// patches), and says how many of the `listed` equivalents it proves.
#[allow(clippy::too_many_arguments)]
pub fn run(
    arches: &str,
    file: &str,
    text: &str,
    base: &[PathBuf],
    mutants: &[Mutant],
    listed: &BTreeMap<String, String>,
    out: &Path,
    cache_dir: Option<&Path>,
) -> Result<u8> {
    let digest = crate::support::files::sha256_hex(text);
    let path = out.join(TCE_JSON);
    let mut record = load(out, &digest).unwrap_or(Record { digest: digest.clone(), ..Record::default() });
    for arch in arches.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let build_dir = build_dir(arch, base, cache_dir)?;
        let compiler = Compiler::of(&build_dir, file)?;
        let scratch = tempfile::tempdir()?;
        crate::support::progress::line(format!("tce: {arch}: the original and {} mutants", mutants.len()));
        let original = compiler
            .object(text, &scratch.path().join("original"))?
            .map_err(|e| error(Kind::CannotBuild, format!("{file} as it is does not compile on its own: {e}")))?;
        let objects = compile_all(&compiler, text, mutants, scratch.path())?;
        let found = tce::judge(&original, &objects);
        say(arch, &found, listed);
        record.arches.entry(arch.to_string()).or_default().extend(found);
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    std::fs::write(&path, serde_json::to_vec_pretty(&record)?)
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(0)
}

/// Every mutant's stripped object (or its compile error), in id order, two compilers at a time.
fn compile_all(compiler: &Compiler, text: &str, mutants: &[Mutant], scratch: &Path) -> Result<tce::Objects> {
    let mut sorted: Vec<&Mutant> = mutants.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4);
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let (next, done, sorted) = (&next, &done, &sorted);
                s.spawn(move || -> Result<()> {
                    let own = scratch.join(format!("w{w}"));
                    loop {
                        let n = next.fetch_add(1, Ordering::SeqCst);
                        let Some(m) = sorted.get(n) else { return Ok(()) };
                        let obj = compiler.object(&m.apply(text), &own)?;
                        if (n + 1) % 50 == 0 {
                            crate::support::progress::line(format!("tce: {} of {} compiled", n + 1, sorted.len()));
                        }
                        done.lock().unwrap_or_else(|e| e.into_inner()).push((n, m.id.clone(), obj));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| anyhow::anyhow!("a compiler thread panicked"))??;
        }
        Ok(())
    })?;
    let mut all = done.into_inner().unwrap_or_else(|e| e.into_inner());
    all.sort_by_key(|(n, _, _)| *n);
    Ok(all.into_iter().map(|(_, id, obj)| (id, obj)).collect())
}

/// One arch's figures, and which listed equivalents it proves (and which it shows differ).
fn say(arch: &str, found: &BTreeMap<String, Finding>, listed: &BTreeMap<String, String>) {
    let count = |f: &dyn Fn(&Finding) -> bool| found.values().filter(|x| f(x)).count();
    eprintln!(
        "tce: {arch}: {} mutants: {} equivalent (object identical to the original's), {} duplicates of another mutant, {} differ, {} do not compile",
        found.len(),
        count(&|f| *f == Finding::Equivalent),
        count(&|f| matches!(f, Finding::Duplicate { .. })),
        count(&|f| *f == Finding::Differs),
        count(&|f| matches!(f, Finding::CompileError { .. })),
    );
    let ids: Vec<&String> = listed.keys().filter(|id| found.contains_key(*id)).collect();
    let proven: Vec<&&String> = ids.iter().filter(|id| found[**id] == Finding::Equivalent).collect();
    eprintln!("tce: {arch}: of the {} listed equivalents compiled, {} are proven by TCE", ids.len(), proven.len());
    for id in &proven {
        eprintln!("tce: {arch}: proven: {id}");
    }
}

/// The build folder of `arch`'s default kernel (with the `base` patches): the kernel is built
/// or found in the cache, and its folder is the one whose `.config` is the kernel's.
fn build_dir(arch: &str, base: &[PathBuf], cache_dir: Option<&Path>) -> Result<PathBuf> {
    let mut argv = vec!["xtask".to_string(), "kernel".into(), "--arch".into(), arch.into()];
    for p in base {
        argv.extend(["--patch".to_string(), p.display().to_string()]);
    }
    if let Some(c) = cache_dir {
        argv.extend(["--cache-dir".to_string(), c.display().to_string()]);
    }
    let Cmd::Kernel(args) = Xtask::try_parse_from(&argv).context("the kernel's command line")?.command else {
        unreachable!("a kernel command line")
    };
    crate::setup::provision::ensure(&crate::setup::provision::Needs::kernel(&args))?;
    let built = crate::kernel::build_all(&args.request()?)?;
    let b = built.first().context("no kernel built")?;
    let config = std::fs::read(&b.config).with_context(|| format!("reading {}", b.config.display()))?;
    let builds = crate::kernel::cache::root(cache_dir).join("build");
    for dir in std::fs::read_dir(&builds).with_context(|| format!("reading {}", builds.display()))?.flatten() {
        let name = dir.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("{arch}-"))
            && std::fs::read(dir.path().join(".config")).ok() == Some(config.clone())
        {
            return Ok(dir.path());
        }
    }
    Err(error(Kind::Infra, format!("no build folder under {} holds the {arch} kernel's .config", builds.display())))
}
