//! The real check of `cargo xtask atlas`: Debian's default source and `--kernel-version 7.3`
//! on one arch, the faults and coverage profiles (the coverage checks' kernel), the
//! allocation-failure suite and another, the grid, the exit code and the files checked.

use std::path::Path;

use anyhow::{Context, Result};

use xtask::cli::{AtlasArgs, BudgetArgs};

/// The arch the check boots (its 7.3 kernel is built the first time, then cached).
pub const ARCH: &str = "x86_64";

/// The suites it runs: the allocation failures, which follow the code rather than one kernel
/// version's count of points, and a suite of the everyday ABI.
const FILTERS: [&str; 2] = ["faults/*", "format/*"];

/// `atlas --arch x86_64 --kernel-version 7.3 --profile faults --profile coverage --filter faults/*
/// --filter format/*`: two
/// kernel columns (6.12 then 7.3) on one arch, every selected scenario a row with a status on
/// both, every differing cell explained (exit 0), and `atlas.json`, `atlas.html`, `kcidb.json`
/// in `results/latest-atlas`, each kernel's run folder beside it.
pub fn default_and_7_3(scratch: &Path, cache_dir: Option<&Path>) -> Result<()> {
    let results = scratch.join("atlas-results");
    let version = xtask::kernel::debian::parse_kernel_version("7.3").map_err(anyhow::Error::msg)?;
    let args = AtlasArgs {
        kernel_versions: vec![version],
        kernels: vec![],
        from: vec![],
        arch: ARCH.into(),
        suites: vec![],
        filters: FILTERS.iter().map(|f| f.to_string()).collect(),
        list: false,
        // The coverage checks' kernel (faults and GCOV): one build serves both checks.
        profiles: vec![crate::coverage::PROFILE.into(), "coverage".into()],
        explained: None,
        jobs: None,
        cache_dir: cache_dir.map(Path::to_path_buf),
        vm: crate::test_vm(&results),
        budget: BudgetArgs::default(),
    };
    let code = args.run()?;
    let dir = results.join(xtask::run::atlas::LATEST);
    let atlas: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("atlas.json")).with_context(|| format!("{}/atlas.json", dir.display()))?,
    )?;
    anyhow::ensure!(
        code == 0,
        "exit code {code}; summary {}, differing {}, stale {}",
        atlas["summary"],
        atlas["differing"],
        atlas["stale"]
    );
    let labels: Vec<&str> =
        atlas["kernels"].as_array().context("no kernels")?.iter().filter_map(|k| k["label"].as_str()).collect();
    anyhow::ensure!(labels == ["debian", "debian-7.3"], "kernels {labels:?}");
    let releases: Vec<&str> =
        atlas["kernels"].as_array().unwrap().iter().filter_map(|k| k["release"].as_str()).collect();
    anyhow::ensure!(
        releases.len() == 2 && releases[0].starts_with("6.12.") && releases[1].starts_with("7.3."),
        "releases {releases:?}"
    );
    anyhow::ensure!(atlas["arches"] == serde_json::json!([ARCH]), "arches {}", atlas["arches"]);
    let rows = atlas["rows"].as_array().context("no rows")?;
    anyhow::ensure!(rows.len() > 20, "{} rows", rows.len());
    for r in rows {
        let name = r["scenario"].as_str().unwrap_or_default();
        anyhow::ensure!(name.starts_with("faults/") || name.starts_with("format/"), "row {name} not selected");
        for key in ["debian/x86_64", "debian-7.3/x86_64"] {
            let status = r["cells"][key]["status"].as_str().unwrap_or("absent");
            anyhow::ensure!(!matches!(status, "missing" | "absent" | "not-run" | "error"), "{name} {key}: {status}");
            // No fault scenario is skipped on either kernel: none is pinned to a version.
            anyhow::ensure!(!(name.starts_with("faults/") && status == "skip"), "{name} {key}: skipped");
        }
    }
    anyhow::ensure!(atlas["summary"]["unexplained"] == 0 && atlas["summary"]["stale"] == 0, "{}", atlas["summary"]);
    let page = std::fs::read_to_string(dir.join("atlas.html"))?;
    anyhow::ensure!(page.contains("<h2>x86_64</h2>") && page.contains("debian-7.3 ("), "atlas.html lacks the grid");
    let kcidb: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("kcidb.json"))?)?;
    let count = |k: &str| kcidb[k].as_array().map_or(0, Vec::len);
    anyhow::ensure!(
        count("checkouts") == 2 && count("builds") == 2,
        "kcidb: {} checkouts, {} builds",
        count("checkouts"),
        count("builds")
    );
    for k in atlas["kernels"].as_array().unwrap() {
        let run = dir.join(k["run_dir"].as_str().context("a kernel without its run")?).join("run.json");
        anyhow::ensure!(run.is_file(), "{} missing", run.display());
    }
    Ok(())
}
