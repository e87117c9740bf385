//! `cargo xtask mutants --run`: each planned mutant in turn on the schemata kernel (every mutant
//! of the file in one build, mutant N switched on at boot by `trace_events_user.mutant=N`), or,
//! for a mutant whose schema does not compile and with `--one-by-one`, its diff an extra
//! `--patch` on the default kernel (the private mirror makes it an incremental build of one
//! object and a relink); only its covering scenarios booted (`cargo xtask run --fail-fast
//! --filter`, a child process of this binary so that `--timeout` bounds each mutant alone), the
//! judged run classified and appended to the state file before the next, so an interrupted run
//! resumes. A run that `--timeout` stopped with no scenario failed runs once more, alone, with
//! twice the time, before the mutant counts as Timeout (`classify::confirm_timeout`).

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;

use super::batches::Batching;
use super::child::{child, child_run, patch_args, profile_args, run_argv, ChildRun, Kernels};
use super::kills::Kills;
use crate::cli::Xtask;
use crate::mutants::classify::{self, RunEnd};
use crate::mutants::mutant::Mutant;
use crate::mutants::plan::{self, Step};
use crate::mutants::report::{MutantResult, Outcome};
use crate::mutants::schemata;
use crate::support::exit::{error, Kind};
use crate::support::progress::line;

/// Runs every mutant whose step is `Run`, in order, `parallel` at a time, each result (with the
/// stage's label when there are stages) appended
/// to the state file as it ends (only outcomes of runs: NoCoverage and the equivalents are
/// decided afresh each time, from the map and the list as they are then). A mutant the schemata
/// kernel holds boots it with its number; any other is built on its own. An error (an
/// infrastructure failure, an interrupt) hands out no more mutants; the ones running finish.
///
/// The workers share one gate, a read-write lock: each mutant's run holds it for reading, so
/// up to `parallel` run together, and the second run that confirms a timeout holds it for
/// writing, so it starts once the runs in progress have ended and none starts until it has
/// (on Linux, std's lock lets no reader in while a writer waits; elsewhere it may wait longer,
/// but it still runs alone). A worker never holds the gate while it waits for it.
pub fn run_all(
    mutants: &[Mutant],
    source: &str,
    kernels: Kernels,
    steps: &BTreeMap<String, Step>,
    (out, stage): (&Path, Option<&str>),
    (timeout, parallel, batching): (Option<Duration>, usize, Option<&Batching>),
) -> Result<u8> {
    let state = plan::state_file(out);
    std::fs::create_dir_all(out.join("patches")).with_context(|| format!("creating {}", out.display()))?;
    let todo: Vec<&Mutant> = mutants.iter().filter(|m| matches!(steps.get(&m.id), Some(Step::Run { .. }))).collect();
    let work = work_of(&todo, steps, &kernels, batching);
    let kills = Kills::of(plan::load_state(&state)?.values());
    let next = AtomicUsize::new(0);
    let appending = Mutex::new(());
    let gate = RwLock::new(());
    let record = |result: Option<MutantResult>| -> Result<()> {
        // Nothing booted: this stage's kernel skips every covering scenario, so it says nothing
        // of the mutant (an earlier stage's result stands).
        let Some(mut result) = result else { return Ok(()) };
        result.stage = stage.map(str::to_string);
        kills.count(&result);
        let _one_at_a_time = appending.lock().unwrap_or_else(|e| e.into_inner());
        plan::append_state(&state, &result)
    };
    let position = |m: &Mutant| todo.iter().position(|t| t.id == m.id).unwrap_or(0) + 1;
    let ctx = Ctx {
        source,
        kernels: &kernels,
        out,
        timeout,
        gate: &gate,
        record: &record,
        position: &position,
        total: todo.len(),
    };
    std::thread::scope(|s| -> Result<()> {
        let worker = || -> Result<()> {
            loop {
                let n = next.fetch_add(1, Ordering::SeqCst);
                let Some(w) = work.get(n) else { return Ok(()) };
                let ids: Vec<&str> = match w {
                    Work::One(m) => vec![m.id.as_str()],
                    Work::Batch(ms) => ms.iter().map(|m| m.id.as_str()).collect(),
                };
                // Each mutant's scenarios in the order that killed most so far.
                let ordered = kills.order(steps, ids);
                let done = match w {
                    Work::One(m) => alone(&ctx, &ordered, &[*m]),
                    Work::Batch(ms) => in_batches(&ctx, &ordered, ms, batching.expect("only when batching")),
                };
                if done.is_err() {
                    next.store(work.len(), Ordering::SeqCst);
                    return done;
                }
            }
        };
        let workers: Vec<_> = (0..parallel.max(1)).map(|_| s.spawn(worker)).collect();
        let mut first = Ok(());
        for w in workers {
            let r = w.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a mutant's thread panicked")));
            first = first.and(r);
        }
        first
    })?;
    Ok(0)
}

/// What a worker's runs share: the file's text, the kernels, the output folder, the per-mutant
/// `--timeout`, the gate, how a result is recorded and where a mutant is in the whole run.
struct Ctx<'a> {
    source: &'a str,
    kernels: &'a Kernels<'a>,
    out: &'a Path,
    timeout: Option<Duration>,
    gate: &'a RwLock<()>,
    record: &'a (dyn Fn(Option<MutantResult>) -> Result<()> + Sync),
    position: &'a (dyn Fn(&Mutant) -> usize + Sync),
    total: usize,
}

/// Each of `ms` in a boot of its own, its result recorded.
fn alone(ctx: &Ctx, steps: &BTreeMap<String, Step>, ms: &[&Mutant]) -> Result<()> {
    for m in ms {
        let Some(Step::Run { scenarios }) = steps.get(&m.id) else { continue };
        let n = ((ctx.position)(m), ctx.total);
        let result = run_mutant(m, n, scenarios, ctx.source, ctx.kernels, ctx.out, (ctx.timeout, ctx.gate))?;
        (ctx.record)(result)?;
    }
    Ok(())
}

/// A batch of mutants in one boot, the groups it never started in another, until none is left;
/// then what it could not vouch for alone, and its survivors' isolated scenarios.
fn in_batches(ctx: &Ctx, steps: &BTreeMap<String, Step>, ms: &[&Mutant], batching: &Batching) -> Result<()> {
    let (mut batch, mut left) = (ms.to_vec(), Vec::new());
    while !batch.is_empty() {
        let decided = {
            let _shared = ctx.gate.read().unwrap_or_else(PoisonError::into_inner);
            let (first, last) = ((ctx.position)(batch[0]), (ctx.position)(batch[batch.len() - 1]));
            line(format!("mutants {first}-{last}/{}: {} in one boot", ctx.total, batch.len()));
            super::batches::run_batch(&batch, (steps, batching), ctx.kernels, ctx.out, ctx.timeout)?
        };
        for (_, result) in decided.results {
            (ctx.record)(result)?;
        }
        left.extend(decided.alone);
        for (m, isolated) in decided.isolated_left {
            let n = ((ctx.position)(m), ctx.total);
            let result = run_mutant(m, n, &isolated, ctx.source, ctx.kernels, ctx.out, (ctx.timeout, ctx.gate))?;
            (ctx.record)(result.map(|r| with_covering(r, steps.get(&m.id))))?;
        }
        batch = decided.again;
    }
    alone(ctx, steps, &left)
}

/// A result whose run had only some of the mutant's covering scenarios (a batch ran the
/// others) with all of them.
fn with_covering(mut r: MutantResult, step: Option<&Step>) -> MutantResult {
    if let Some(Step::Run { scenarios }) = step {
        let all: BTreeSet<String> = scenarios.values().flatten().cloned().chain(r.covered_by.drain(..)).collect();
        r.covered_by = all.into_iter().collect();
    }
    r
}

/// What a worker takes: a mutant in a boot of its own, or a batch in one boot.
enum Work<'a> {
    One(&'a Mutant),
    Batch(Vec<&'a Mutant>),
}

/// The mutants to run as work: those a batch can hold in batches of the batching's size (in
/// the mutants' order), the others one by one after them.
fn work_of<'a>(
    todo: &[&'a Mutant],
    steps: &BTreeMap<String, Step>,
    kernels: &Kernels,
    batching: Option<&Batching>,
) -> Vec<Work<'a>> {
    let Some(b) = batching else { return todo.iter().map(|m| Work::One(m)).collect() };
    let number = |m: &Mutant| kernels.schemata.and_then(|(_, n)| n.get(&m.id).copied());
    let (held, alone): (Vec<&Mutant>, Vec<&Mutant>) =
        todo.iter().partition(|m| steps.get(&m.id).is_some_and(|step| b.holds(m, step, number(m))));
    // A batch is one arch's: consecutive mutants of the same arch.
    let mut work: Vec<Work> = Vec::new();
    let mut by_arch: BTreeMap<&str, Vec<&Mutant>> = BTreeMap::new();
    for m in held {
        let Some(Step::Run { scenarios }) = steps.get(&m.id) else { continue };
        let arch = scenarios.keys().next().map(String::as_str).unwrap_or_default();
        by_arch.entry(arch).or_default().push(m);
    }
    for ms in by_arch.into_values() {
        work.extend(ms.chunks(b.size).map(|c| Work::Batch(c.to_vec())));
    }
    work.extend(alone.into_iter().map(Work::One));
    work
}

/// One mutant's run (`n` of `total`): the schemata kernel with its number, or its own diff;
/// under the gate of [`run_all`], held for reading, and for writing by the second run that
/// confirms a timeout.
fn run_mutant(
    m: &Mutant,
    (n, total): (usize, usize),
    scenarios: &BTreeMap<String, Vec<String>>,
    source: &str,
    kernels: &Kernels,
    out: &Path,
    (timeout, gate): (Option<Duration>, &RwLock<()>),
) -> Result<Option<MutantResult>> {
    crate::support::progress::line(format!("mutant {n}/{total}: {} {}:{} {}", m.id, m.file, m.line, m.change()));
    let results = out.join("runs").join(&m.id);
    // The schemata kernel and the mutant's number in it, or the mutant's own diff.
    let (patch, number) = match kernels.schemata.and_then(|(p, numbers)| Some((p, *numbers.get(&m.id)?))) {
        Some((kernel, number)) => (kernel.clone(), Some(number)),
        None => {
            let patch = out.join("patches").join(format!("{}.patch", m.id));
            std::fs::write(&patch, m.diff(source)).with_context(|| format!("writing {}", patch.display()))?;
            (patch, None)
        }
    };
    // The command line with a given `--timeout`: the first run's, then a confirmation's.
    let argv = |timeout: Option<Duration>| -> Vec<String> {
        let mut argv = run_argv(kernels.base, &patch, scenarios, &results, timeout);
        if let Some(number) = number {
            argv.extend(["--kernel-args".to_string(), format!("{}={number}", schemata::PARAM)]);
        }
        argv.extend(profile_args(kernels.profiles));
        argv.extend(kernels.source.iter().cloned());
        argv
    };
    // Checked here, so a bad command line is our error, not the mutant's outcome.
    Xtask::try_parse_from(argv(timeout)).context("the mutant's run command line")?;
    // The time its runs took, not the time spent waiting at the gate.
    let ran = Cell::new(Duration::ZERO);
    let attempt = |timeout: Option<Duration>| {
        let started = Instant::now();
        let end = run_one(&argv(timeout)[1..], &results, timeout);
        ran.set(ran.get() + started.elapsed());
        end
    };
    let first = {
        let _shared = gate.read().unwrap_or_else(PoisonError::into_inner);
        attempt(timeout)?
    };
    let outcome = match first {
        None => None,
        Some(first) => Some(classify::confirm_timeout(first, timeout, |longer| {
            crate::support::progress::line(format!(
                "mutant {}: past --timeout {} s with no scenario failed: once more with {} s, alone (after the \
                 runs in progress)",
                m.id,
                timeout.unwrap_or_default().as_secs(),
                longer.as_secs()
            ));
            let _alone = gate.write().unwrap_or_else(PoisonError::into_inner);
            attempt(Some(longer))?.ok_or_else(|| {
                error(Kind::Infra, format!("the mutant's second run booted nothing; see {}", results.display()))
            })
        })?),
    };
    if number.is_none() {
        drop_kernels(&results, &patch, kernels.cache);
    }
    let Some(outcome) = outcome else {
        crate::support::progress::line(format!(
            "mutant {}: not run here: this stage's kernel skips every scenario that covers it",
            m.id
        ));
        return Ok(None);
    };
    let covered_by: BTreeSet<String> = scenarios.values().flatten().cloned().collect();
    let result = MutantResult {
        id: m.id.clone(),
        outcome,
        covered_by: covered_by.into_iter().collect(),
        duration_ms: Some(ran.get().as_millis() as u64),
        stage: None,
    };
    crate::support::progress::line(format!("mutant {}: {}", m.id, result.outcome.name()));
    Ok(Some(result))
}

/// Removes the cache entries of the kernels a mutant's run booted (19 MB each on x86_64: a
/// whole-file run would fill the cache with kernels nothing boots again), only those built with
/// the mutant's own patch (by its digest: an earlier run's entry may name another copy of it).
/// Best effort: a leftover entry costs space, not correctness.
fn drop_kernels(results: &Path, patch: &Path, cache: &Path) {
    let Ok(digest) = crate::support::files::sha256_file(patch) else { return };
    for (meta, entry) in booted_kernels(results, cache) {
        if meta["patches"].as_array().into_iter().flatten().any(|p| p["sha256"] == digest.as_str()) {
            let _ = std::fs::remove_dir_all(entry);
        }
    }
}

/// The kernels a mutant's newest run booted: each arch's `kernel-metadata.json` and the cache
/// entry it names (`kernels/<arch>/<key>`), where the image and its `config` are.
pub fn booted_kernels(results: &Path, cache: &Path) -> Vec<(serde_json::Value, PathBuf)> {
    let run = results.join(crate::judging::run_folder::LATEST);
    let mut out = vec![];
    for arch in std::fs::read_dir(&run).into_iter().flatten().flatten() {
        let metadata = arch.path().join(crate::judging::run_folder::KERNEL_METADATA);
        let Ok(text) = std::fs::read_to_string(metadata) else { continue };
        let Ok(meta) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        let (Some(name), Some(key)) = (meta["arch"].as_str(), meta["key"].as_str()) else { continue };
        if key.len() >= 24 && !name.contains('/') {
            let entry = cache.join("kernels").join(name).join(&key[..24]);
            out.push((meta, entry));
        }
    }
    out
}

/// How `cargo xtask <args>`, run as a child process, ended for the mutant; an infrastructure
/// failure or an interrupt is the run's error, not the mutant's outcome, so it is not recorded
/// and the mutant runs again next time. The child shares our process group, so a Ctrl-C
/// reaches it and it stops its own VMs. `None` when it ended well without a run of its own
/// (`latest` still where it was): the kernel skips every scenario asked for, nothing booted.
/// A run that `timeout` stopped is judged by `classify::timed_out` (its own run only: an
/// earlier run's `run.json` says nothing of this one).
fn run_one(args: &[String], results: &Path, timeout: Option<Duration>) -> Result<Option<RunEnd>> {
    let ChildRun { code, said, run: own } = child_run(args, results, true)?;
    let fresh = own.is_some();
    if code == Some(0) && !fresh {
        return Ok(None);
    }
    let run_json = results.join(crate::judging::run_folder::LATEST).join(crate::judging::run_folder::RUN_JSON);
    let run = || crate::results::compare::read_run_json(&run_json);
    let judged = || -> Result<Outcome> { Ok(classify::classify(&run()?)) };
    let end = match code {
        Some(c) if c == i32::from(Kind::CannotBuild.code()) => {
            Ok(RunEnd::Judged(classify::compile_error(&said.join("\n"))))
        }
        Some(c) if c == i32::from(Kind::TimedOut.code()) => match run().ok().filter(|_| fresh) {
            Some(run) => Ok(classify::timed_out(&run)),
            None => {
                let shown = timeout.map(|t| format!("{} s", t.as_secs())).unwrap_or_default();
                Err(error(
                    Kind::Infra,
                    format!("--timeout {shown} expired before the mutant's kernel booted: give a longer one"),
                ))
            }
        },
        Some(c) if c == i32::from(Kind::Interrupted.code()) => Err(error(Kind::Interrupted, "interrupted")),
        Some(c) if c == i32::from(Kind::Infra.code()) || c == i32::from(Kind::BadInput.code()) => {
            // A kernel that crashed under the mutant ends its run as an infrastructure error (the
            // VM died); with a kernel report in the judged run that is the mutant's doing.
            let crashed = if c == i32::from(Kind::Infra.code()) { judged().ok() } else { None };
            match crashed {
                Some(k @ Outcome::Killed { .. }) => Ok(RunEnd::Judged(k)),
                _ => Err(error(
                    Kind::Infra,
                    format!(
                        "the mutant's run failed (exit {c}) for a reason not the mutant's; see {}",
                        results.display()
                    ),
                )),
            }
        }
        None => Err(error(Kind::Interrupted, "the mutant's run was killed by a signal")),
        Some(_) => judged().map(RunEnd::Judged),
    };
    end.map(Some)
}

/// The schemata kernel of `file`: every mutant of the file that can be (`schemata::schemata`)
/// in one source, mutant N switched on by `trace_events_user.mutant=N`, as one more `--patch`
/// built once for `arches` (then a cache hit for every mutant). A build that fails names the
/// mutants whose schemata do not compile (`schemata::culprits`): they are left out, to be built
/// one by one, and the build is tried again. What was left out is kept in
/// `<out>/schemata.json` for this source and base, so the next run builds at once (or hits the
/// cache). Returns the patch and each included mutant's number.
pub fn schemata_kernel(
    all: &[Mutant],
    file: &str,
    source: &str,
    kernels: &Kernels,
    arches: &[&str],
    out: &Path,
) -> Result<(PathBuf, BTreeMap<String, u32>)> {
    let base = kernels.base;
    #[derive(serde::Serialize, serde::Deserialize, Default)]
    struct Record {
        key: String,
        left_out: BTreeSet<String>,
    }
    let record_path = out.join("schemata.json");
    let mut key = crate::support::files::sha256_hex(source);
    for p in base {
        key += &crate::support::files::sha256_file(p)?;
    }
    // Not the profiles: what does not compile is the C's doing, so every stage's kernel
    // leaves out the same mutants and builds at the first try after the first stage's.
    let mut record: Record = std::fs::read(&record_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .filter(|r: &Record| r.key == key)
        .unwrap_or(Record { key, ..Record::default() });
    let patch = out.join("schemata.patch");
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for round in 1..=MAX_SCHEMATA_BUILDS {
        let included: Vec<&Mutant> = all.iter().filter(|m| !record.left_out.contains(&m.id)).collect();
        let s = schemata::schemata(source, &included);
        std::fs::write(&patch, schemata::whole_file_diff(file, source, &s.text))
            .with_context(|| format!("writing {}", patch.display()))?;
        crate::support::progress::line(format!(
            "mutants: the schemata kernel, {} of {} mutants in one source (build {round})",
            s.numbers.len(),
            all.len()
        ));
        let mut argv: Vec<String> = vec!["kernel".into(), "--arch".into(), arches.join(",")];
        argv.extend(patch_args(base, &patch));
        argv.extend(profile_args(kernels.profiles));
        argv.extend(kernels.source.iter().cloned());
        let (code, said) = child(&argv, true)?;
        match code {
            Some(0) => {
                std::fs::write(&record_path, serde_json::to_vec_pretty(&record)?)
                    .with_context(|| format!("writing {}", record_path.display()))?;
                return Ok((patch, s.numbers.into_iter().collect()));
            }
            Some(c) if c == i32::from(Kind::CannotBuild.code()) => {
                let log = said
                    .iter()
                    .find_map(|l| l.split_once("==== full log: ").map(|(_, r)| r.trim_end_matches(" ====").to_string()))
                    .and_then(|p| std::fs::read_to_string(p).ok())
                    .unwrap_or_else(|| said.join("\n"));
                let at = schemata::error_positions(&log, file, &s.text);
                let blamed = schemata::culprits(&s, &at);
                if blamed.is_empty() {
                    return Err(error(
                        Kind::CannotBuild,
                        format!(
                            "the schemata kernel did not build, for a reason no mutant explains:\n{}",
                            said.join("\n")
                        ),
                    ));
                }
                for (id, n) in &s.numbers {
                    if blamed.contains(n) {
                        record.left_out.insert(id.clone());
                    }
                }
                crate::support::progress::line(format!(
                    "mutants: {} mutant(s) whose schemata do not compile are left to builds of their own",
                    blamed.len()
                ));
            }
            _ => return Err(error(Kind::Infra, format!("building the schemata kernel failed:\n{}", said.join("\n")))),
        }
    }
    Err(error(Kind::CannotBuild, format!("the schemata kernel still did not build after {MAX_SCHEMATA_BUILDS} tries")))
}

/// How many times the schemata kernel is built, each leaving out what did not compile.
const MAX_SCHEMATA_BUILDS: u32 = 6;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cmd;

    #[test]
    fn a_mutants_run_command_line_parses_as_run() {
        let scenarios = BTreeMap::from([
            ("x86_64".to_string(), vec!["abi/a".to_string(), "abi/b".to_string()]),
            ("s390x".to_string(), vec!["abi/b".to_string(), "endian/c".to_string()]),
        ]);
        let argv = run_argv(
            &[PathBuf::from("/p/base.patch")],
            Path::new("/o/patches/abc.patch"),
            &scenarios,
            Path::new("/o/runs/abc"),
            Some(Duration::from_secs(300)),
        );
        let Cmd::Run(args) = Xtask::try_parse_from(&argv).unwrap().command else { panic!() };
        assert!(args.fail_fast);
        assert_eq!(args.budget.timeout, Some(Duration::from_secs(300)));
        assert_eq!(args.kernel.arch, "s390x,x86_64");
        assert_eq!(args.kernel.source.patches, [PathBuf::from("/p/base.patch"), PathBuf::from("/o/patches/abc.patch")]);
        assert_eq!(args.select.filters, ["abi/b", "endian/c", "abi/a"], "each arch's order, the first arch's first");
        assert!(args.select.in_filter_order);
        assert_eq!(args.vm.results, Some(PathBuf::from("/o/runs/abc")));
    }
}
