//! `cargo xtask test`: the unit tests, then the slow checks that need real tools: kernel
//! builds for every arch (cached across runs) and the dropped-option gate.

use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result};

use crate::exit::{self, Kind};
use crate::flags::{ConfigArgs, KernelArgs, SourceArgs, TestArgs};
use crate::progress::line;

struct Outcome {
    name: String,
    error: Option<String>,
}

pub fn run(args: &TestArgs) -> Result<u8> {
    let root = crate::project_root();
    let mut outcomes = Vec::new();

    let started = Instant::now();
    let unit = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["test", "--workspace", "--quiet"])
        .current_dir(&root)
        .status()
        .context("running cargo test")?;
    record(
        &mut outcomes,
        "unit tests (cargo test --workspace)",
        started,
        if unit.success() { Ok(()) } else { Err(anyhow::anyhow!("cargo test failed ({unit})")) },
    );
    if args.unit_only {
        return Ok(summary(&outcomes));
    }

    crate::setup::run(true)?;
    let base = KernelArgs {
        arch: "all".into(),
        source: SourceArgs::default(),
        config: ConfigArgs::default(),
        jobs: None,
        cache_dir: args.cache_dir.clone(),
        config_only: false,
        json: false,
    };

    for arch in crate::arch::ARCHES {
        let started = Instant::now();
        let args = KernelArgs { arch: arch.name.into(), ..base.clone() };
        let result = crate::kernels(&args).and_then(|built| {
            let b = &built[0];
            anyhow::ensure!(b.image.is_file(), "no image at {}", b.image.display());
            let eff = &b.metadata.config.effective;
            anyhow::ensure!(
                eff.get("CONFIG_USER_EVENTS").map(String::as_str) == Some("y"),
                "CONFIG_USER_EVENTS is {:?} in {}",
                eff.get("CONFIG_USER_EVENTS"),
                b.config.display()
            );
            anyhow::ensure!(
                b.metadata.config.missing.is_empty(),
                "missing options recorded: {:?}",
                b.metadata.config.missing
            );
            anyhow::ensure!(
                b.metadata.kernelrelease.starts_with("6.12"),
                "kernelrelease {:?} is not 6.12",
                b.metadata.kernelrelease
            );
            let repro = b.image.with_file_name("reproducer.sh");
            anyhow::ensure!(repro.is_file(), "no reproducer.sh beside {}", b.image.display());
            Ok(())
        });
        record(&mut outcomes, &format!("{}: kernel builds with every requested option", arch.name), started, result);

        let started = Instant::now();
        let result = crate::kernels(&args).and_then(|built| {
            anyhow::ensure!(built[0].cache_hit, "the second identical request ran make (cache miss)");
            Ok(())
        });
        record(&mut outcomes, &format!("{}: an identical request is a cache hit", arch.name), started, result);
    }

    let started = Instant::now();
    let dropping = KernelArgs {
        arch: "arm64".into(),
        config_only: true,
        config: ConfigArgs {
            fragments: vec![root.join("xtask/test_data/arm64-without-ftrace.config")],
            ..ConfigArgs::default()
        },
        ..base.clone()
    };
    let result = match crate::kernels(&dropping) {
        Ok(_) => Err(anyhow::anyhow!("the configuration was accepted although CONFIG_USER_EVENTS cannot be set")),
        Err(e) => {
            let msg = format!("{e:#}");
            let code = exit::code_for(&e);
            if code == Kind::CannotBuild.code()
                && msg.contains("CONFIG_USER_EVENTS: asked for `y`")
                && msg.contains("unmet: depends on FTRACE [FTRACE=n]")
            {
                Ok(())
            } else {
                Err(anyhow::anyhow!("wrong failure (exit code {code}): {msg}"))
            }
        }
    };
    record(&mut outcomes, "arm64: a fragment that drops CONFIG_USER_EVENTS fails naming FTRACE", started, result);

    Ok(summary(&outcomes))
}

fn record(outcomes: &mut Vec<Outcome>, name: &str, started: Instant, result: Result<()>) {
    let secs = started.elapsed().as_secs_f64();
    match &result {
        Ok(()) => line(format!("[PASSED] {name} ({secs:.1} s)")),
        Err(e) => line(format!("[FAILED] {name} ({secs:.1} s): {e:#}")),
    }
    outcomes.push(Outcome { name: name.to_string(), error: result.err().map(|e| format!("{e:#}")) });
}

fn summary(outcomes: &[Outcome]) -> u8 {
    let failed: Vec<&Outcome> = outcomes.iter().filter(|o| o.error.is_some()).collect();
    for f in &failed {
        eprintln!("FAILED: {}\n  {}", f.name, f.error.as_deref().unwrap_or_default().replace('\n', "\n  "));
    }
    println!("{} passed, {} failed", outcomes.len() - failed.len(), failed.len());
    if failed.is_empty() {
        0
    } else {
        Kind::TestFailed.code()
    }
}
