//! The atlas's unit tests: the grid, the neighbour rule, explanations from `requires` and from
//! the list, stale rows, the list's errors, and the renderings.

use super::explained::{judge, parse, Explanation, Listed};
use super::*;
use crate::results::model::{Run, Status};

const NEEDS_7: &str = "needs kernel >=7.0, this is 6.12.117";

/// A cell: scenario, status, reason.
type Spec<'a> = (&'a str, Status, Option<&'a str>);

/// A run of `release` whose arches hold these (scenario, status, reason) cells, made from the
/// results fixture (its boots, verdicts and provenance kept).
fn run(release: &str, arches: &[(&str, &[Spec])]) -> Run {
    let mut r = crate::results::tests::fixture();
    r.run_id = format!("run-{release}");
    let template = r.arches[0].clone();
    r.arches = arches
        .iter()
        .map(|(arch, cells)| {
            let mut a = template.clone();
            for b in &mut a.boots {
                b.name = b.name.replacen(&template.arch, arch, 1);
            }
            a.arch = arch.to_string();
            if let Some(k) = a.kernel.as_mut() {
                k.release = release.into();
                k.build_key = format!("key-{release}-{arch}");
                k.source_id = format!("src-{release}");
            }
            let model = template.scenarios[0].clone();
            a.scenarios = cells
                .iter()
                .map(|(name, status, reason)| crate::results::model::Scenario {
                    name: name.to_string(),
                    status: *status,
                    reason: reason.map(String::from),
                    ..model.clone()
                })
                .collect();
            a
        })
        .collect();
    r
}

fn kernel<'a>(label: &str, run: &'a Run) -> KernelRun<'a> {
    KernelRun { label: label.into(), flags: String::new(), run: Some(run), link: Some(format!("../{}", run.run_id)) }
}

fn row(line: usize, scenario: &str, arch: &str, kernel: &str, kind: &str, reference: &str) -> Listed {
    Listed {
        file: explained::LIST.into(),
        line,
        scenario: scenario.into(),
        arch: arch.into(),
        kernel: kernel.into(),
        kind: kind.into(),
        reference: reference.into(),
        note: "n".into(),
    }
}

use Status::{Fail, Fixed, Pass, Skip, Xfail};

/// Three kernels (given newest first) on two arches:
/// - `s/same`: pass everywhere (uniform);
/// - `s/new-abi`: pass on 6.12, fail from 7.2 on both arches (a change at 7.2);
/// - `s/arm-only`: skipped on x86_64 by a `requires`, pass on arm64 (outliers);
/// - `s/fixed`: xfail until 7.3, fixed there, on x86_64 only (arm64 xfail throughout);
/// - `s/gone`: pass, missing from 7.3 on arm64.
fn three() -> (Run, Run, Run) {
    let cfg = Some("needs CONFIG_ARM64 (y or m), the kernel has it absent");
    let r612 = run(
        "6.12.117",
        &[
            (
                "x86_64",
                &[
                    ("s/same", Pass, None),
                    ("s/new-abi", Pass, None),
                    ("s/arm-only", Skip, cfg),
                    ("s/fixed", Xfail, None),
                    ("s/gone", Pass, None),
                ],
            ),
            (
                "arm64",
                &[
                    ("s/same", Pass, None),
                    ("s/new-abi", Pass, None),
                    ("s/arm-only", Pass, None),
                    ("s/fixed", Xfail, None),
                    ("s/gone", Pass, None),
                ],
            ),
        ],
    );
    let r72 = run(
        "7.2.13",
        &[
            (
                "x86_64",
                &[
                    ("s/same", Pass, None),
                    ("s/new-abi", Fail, None),
                    ("s/arm-only", Skip, cfg),
                    ("s/fixed", Xfail, None),
                    ("s/gone", Pass, None),
                ],
            ),
            (
                "arm64",
                &[
                    ("s/same", Pass, None),
                    ("s/new-abi", Fail, None),
                    ("s/arm-only", Pass, None),
                    ("s/fixed", Xfail, None),
                    ("s/gone", Pass, None),
                ],
            ),
        ],
    );
    let r73 = run(
        "7.3.4",
        &[
            (
                "x86_64",
                &[
                    ("s/same", Pass, None),
                    ("s/new-abi", Fail, None),
                    ("s/arm-only", Skip, cfg),
                    ("s/fixed", Fixed, None),
                    ("s/gone", Pass, None),
                ],
            ),
            (
                "arm64",
                &[
                    ("s/same", Pass, None),
                    ("s/new-abi", Fail, None),
                    ("s/arm-only", Pass, None),
                    ("s/fixed", Xfail, None),
                ],
            ),
        ],
    );
    (r612, r72, r73)
}

fn grid_of(runs: &(Run, Run, Run)) -> Grid {
    // Given out of order: the grid orders the kernels by version.
    let kernels = [kernel("debian-7.3", &runs.2), kernel("debian", &runs.0), kernel("debian-7.2", &runs.1)];
    Grid::build(&kernels, &["x86_64", "arm64"])
}

/// Each differing cell as `scenario kernel arch status`.
fn differing(grid: &Grid) -> Vec<String> {
    grid.differing()
        .iter()
        .map(|d| {
            format!(
                "{} {} {} {}",
                grid.rows[d.row].scenario,
                grid.kernels[d.kernel].label,
                grid.arches[d.arch],
                d.status.as_str()
            )
        })
        .collect()
}

#[test]
fn the_grid_orders_kernels_by_version_and_keeps_every_cell() {
    let runs = three();
    let g = grid_of(&runs);
    let labels: Vec<&str> = g.kernels.iter().map(|k| k.label.as_str()).collect();
    assert_eq!(labels, ["debian", "debian-7.2", "debian-7.3"]);
    assert_eq!(g.kernels[2].title(), "debian-7.3 (7.3.4)");
    assert_eq!(g.kernels[0].run_dir.as_deref(), Some("../run-6.12.117"));
    assert_eq!(g.kernels[1].arches[1].build_key.as_deref(), Some("key-7.2.13-arm64"));
    let rows: Vec<&str> = g.rows.iter().map(|r| r.scenario.as_str()).collect();
    assert_eq!(rows, ["s/same", "s/new-abi", "s/arm-only", "s/fixed", "s/gone"]);
    assert_eq!(g.rows[0].cells.len(), 6);
    assert_eq!(g.cell(4, 2, 1).status, State::Missing, "s/gone is not in 7.3's arm64 run");
    assert_eq!(g.cell(2, 0, 0).reason.as_deref(), Some("needs CONFIG_ARM64 (y or m), the kernel has it absent"));
    let uniform: Vec<bool> = g.rows.iter().map(Row::uniform).collect();
    assert_eq!(uniform, [true, false, false, false, false]);
    // A kernel whose run booted nothing is a column of missing cells, after the versioned ones.
    let none = KernelRun { label: "broken".into(), flags: "--kernel x".into(), run: None, link: None };
    let g = Grid::build(&[none, kernel("debian", &runs.0)], &["x86_64"]);
    assert_eq!(g.kernels[1].label, "broken");
    assert_eq!(g.cell(0, 1, 0).status, State::Missing);
}

#[test]
fn the_neighbour_rule_flags_changes_and_arch_outliers() {
    let runs = three();
    let g = grid_of(&runs);
    assert_eq!(
        differing(&g),
        [
            // A change on both arches at 7.2, carried by the newer cells only.
            "s/new-abi debian-7.2 x86_64 fail",
            "s/new-abi debian-7.2 arm64 fail",
            // The arch outlier on each kernel: the row's most common status wins the tie.
            "s/arm-only debian x86_64 skip",
            "s/arm-only debian-7.2 x86_64 skip",
            "s/arm-only debian-7.3 x86_64 skip",
            // Fixed on x86_64 at 7.3: a change there; arm64 is not the outlier of that tie.
            "s/fixed debian-7.3 x86_64 fixed",
            "s/gone debian-7.3 arm64 missing",
        ]
    );
    let d = g.differing();
    let fixed = d.iter().find(|d| g.rows[d.row].scenario == "s/fixed").unwrap();
    assert_eq!(
        render::against(&g, fixed),
        ["debian-7.2 x86_64: xfail", "debian-7.3 arm64: xfail"],
        "a change and an outlier at once"
    );
    // The first arch wins a tie the row does not break.
    let r = run("6.12.117", &[("x86_64", &[("s/a", Pass, None)]), ("arm64", &[("s/a", Fail, None)])]);
    let g = Grid::build(&[kernel("debian", &r)], &["x86_64", "arm64"]);
    assert_eq!(differing(&g), ["s/a debian arm64 fail"]);
    // One arch, one kernel: nothing can differ.
    let g = Grid::build(&[kernel("debian", &r)], &["arm64"]);
    assert!(g.rows[0].uniform() && g.differing().is_empty());
}

#[test]
fn a_requires_skip_explains_itself_and_its_neighbours() {
    let runs = three();
    let g = grid_of(&runs);
    let j = judge(&g, &[]);
    let explained: Vec<(String, Option<String>)> = j
        .cells
        .iter()
        .map(|(d, e)| {
            (format!("{} {}", g.rows[d.row].scenario, g.kernels[d.kernel].label), e.as_ref().map(Explanation::describe))
        })
        .collect();
    assert_eq!(explained[2].1.as_deref(), Some("requires: needs CONFIG_ARM64 (y or m), the kernel has it absent"));
    assert_eq!(j.unexplained().count(), 4, "{explained:?}");
    assert!(!j.passes());
    // A pass whose older neighbour skipped for its kernel range is explained by that skip.
    let old = run("6.12.117", &[("x86_64", &[("s/n", Skip, Some(NEEDS_7))])]);
    let new = run("7.3.4", &[("x86_64", &[("s/n", Pass, None)])]);
    let g = Grid::build(&[kernel("debian", &old), kernel("debian-7.3", &new)], &["x86_64"]);
    let j = judge(&g, &[]);
    assert!(j.passes());
    let Some(Explanation::Requires { reason, on }) = &j.cells[0].1 else { panic!("{:?}", j.cells) };
    assert_eq!((reason.as_str(), on.as_deref()), (NEEDS_7, Some("debian x86_64")));
    // A skip the agent decided is not a `requires` one.
    let agent = run("7.3.4", &[("x86_64", &[("s/n", Skip, Some("no second CPU"))])]);
    let g = Grid::build(&[kernel("debian", &new), kernel("debian-7.3", &agent)], &["x86_64"]);
    assert!(!judge(&g, &[]).passes());
    assert!(crate::suites::skip_from_requires("runs /bin/ue-compat32, which has no build for s390x: why"));
    assert!(crate::suites::skip_from_requires("needs CONFIG_X=y, the kernel has it `m`"));
    assert!(!crate::suites::skip_from_requires("no second CPU"));
}

#[test]
fn list_rows_explain_cells_by_arch_and_kernel_and_stale_rows_fail() {
    let runs = three();
    let g = grid_of(&runs);
    let list = [
        row(10, "s/new-abi", "*", ">=7.2", "abi-change", "0123456789ab tracing/user_events: change"),
        row(11, "s/fixed", "x86_64", "debian-7.3", "bug", "patches/upstream/x.md"),
        row(12, "s/gone", "arm64", "*", "test", "renamed"),
        // Names a cell that does not differ: stale.
        row(13, "s/same", "*", ">=7.3", "test", "t"),
        // Names kernels or scenarios this grid does not have: out of scope, not stale.
        row(14, "s/new-abi", "*", ">=8.0", "test", "t"),
        row(15, "other/x", "*", "*", "test", "t"),
        row(16, "s/new-abi", "s390x", "*", "test", "t"),
        // A second row for cells the first already explains: not stale.
        row(17, "s/new-abi", "arm64", "debian-7.2", "test", "t"),
    ];
    let j = judge(&g, &list);
    let lines: Vec<Option<usize>> = j
        .cells
        .iter()
        .map(|(_, e)| match e {
            Some(Explanation::Listed(l)) => Some(l.line),
            _ => None,
        })
        .collect();
    assert_eq!(lines, [Some(10), Some(10), None, None, None, Some(11), Some(12)]);
    assert_eq!(j.unexplained().count(), 0, "the arm-only skips explain themselves");
    assert_eq!(j.stale.iter().map(|l| l.line).collect::<Vec<_>>(), [13]);
    assert_eq!(j.out_of_scope, 3);
    assert!(!j.passes());
    let j = judge(&g, &list[..3]);
    assert!(j.passes());
}

#[test]
fn bad_list_rows_name_the_file_line_and_field() {
    let exists = |p: &str| p == "patches/upstream/x.md";
    let good = "# header\n\ns/a\t*\t>=7.2\tabi-change\t0123456789abcdef tracing/user_events: x\tnote\n\
                s/b\tarm64\tdebian-7.3\tbug\tpatches/upstream/x.md\tnote\ns/c\t*\t*\ttest\tfixed by y\tnote\n";
    let rows = parse(good, "l.tsv", &exists).unwrap();
    assert_eq!(rows.iter().map(|r| r.line).collect::<Vec<_>>(), [3, 4, 5]);
    assert_eq!(rows[1].kernel, "debian-7.3");
    let bad = "nosuite\tarm64\t*\ttest\tt\tn\n\
               s/a\tsparc\t*\ttest\tt\tn\n\
               s/a\t*\t>=7.x\ttest\tt\tn\n\
               s/a\t*\t*\tmaybe\tt\tn\n\
               s/a\t*\t*\tabi-change\tnot-a-commit subject\tn\n\
               s/a\t*\t*\tbug\tpatches/upstream/missing.md\tn\n\
               s/a\t*\t*\ttest\tt\t\n\
               s/a\t*\t*\ttest\n";
    let e = parse(bad, "l.tsv", &exists).unwrap_err();
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 8, "{e}");
    assert!(lines[0].starts_with("l.tsv:1: field 1 (scenario): `nosuite`"), "{e}");
    assert!(lines[1].starts_with("l.tsv:2: field 2 (arch): `sparc` is not an arch"), "{e}");
    assert!(lines[2].starts_with("l.tsv:3: field 3 (kernel): bad kernel range `>=7.x`"), "{e}");
    assert!(lines[3].starts_with("l.tsv:4: field 4 (kind): `maybe`"), "{e}");
    assert!(lines[4].starts_with("l.tsv:5: field 5 (reference)"), "{e}");
    assert!(lines[5].contains("l.tsv:6: field 5 (reference): `patches/upstream/missing.md`"), "{e}");
    assert!(lines[6].starts_with("l.tsv:7: field 6 (note): empty"), "{e}");
    assert!(lines[7].starts_with("l.tsv:8: 4 tab-separated field(s), want 6"), "{e}");
}

#[test]
fn the_tracked_list_parses() {
    let root = crate::support::checkout::project_root();
    let text = std::fs::read_to_string(root.join(explained::LIST)).unwrap();
    parse(&text, explained::LIST, &|p| root.join(p).is_file()).unwrap();
}

#[test]
fn atlas_json_has_the_kernels_the_grid_and_each_explanation() {
    let runs = three();
    let g = grid_of(&runs);
    let list = [row(10, "s/new-abi", "*", ">=7.2", "abi-change", "0123456789ab tracing/user_events: change")];
    let j = judge(&g, &list);
    let v: serde_json::Value = serde_json::from_slice(&render::json(&g, &j, "2026-01-02T03:04:05Z").unwrap()).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    for k in ["schema_version", "generated_at", "arches", "kernels", "summary", "rows", "differing", "stale"] {
        assert!(keys.contains(&k), "{k} missing: {keys:?}");
    }
    assert_eq!(v["kernels"][1]["label"], "debian-7.2");
    assert_eq!(v["kernels"][1]["release"], "7.2.13");
    assert_eq!(v["kernels"][2]["version"], "7.3.4");
    assert_eq!(v["kernels"][0]["arches"][1]["arch"], "arm64");
    assert_eq!(v["rows"][1]["cells"]["debian-7.2/arm64"]["status"], "fail");
    assert_eq!(v["rows"][4]["cells"]["debian-7.3/arm64"]["status"], "missing");
    assert_eq!(v["rows"][0]["uniform"], true);
    assert_eq!(v["differing"][0]["explanation"]["from"], "listed");
    assert_eq!(v["differing"][0]["explanation"]["kind"], "abi-change");
    assert_eq!(v["differing"][0]["explanation"]["reference"], "0123456789ab tracing/user_events: change");
    assert_eq!(v["differing"][2]["explanation"]["from"], "requires");
    assert!(v["differing"][6]["explanation"].is_null());
    assert_eq!(v["summary"]["unexplained"], 2);
    assert_eq!(v["summary"]["uniform"], 1);
}

#[test]
fn the_page_marks_differing_cells_and_folds_uniform_rows() {
    let runs = three();
    let g = grid_of(&runs);
    let stale = row(13, "s/same", "*", ">=7.3", "test", "t");
    let j = judge(&g, &[stale]);
    let page = String::from_utf8(html::render(&g, &j, "2026-01-02T03:04:05Z")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
    assert_eq!(page.matches("<h2>x86_64</h2>").count(), 1);
    assert!(page.contains("<th>debian-7.3 (7.3.4)</th>"), "kernel columns titled with their release");
    assert!(page.contains("class=\"fail differs unexplained\" title=\"unexplained\">fail<sup>1</sup>"), "{page}");
    assert!(page.contains("title=\"requires: needs CONFIG_ARM64 (y or m), the kernel has it absent\""));
    assert!(page.contains("<details><summary>1 uniform row(s), the same on every kernel and arch: 1 pass</summary>"));
    assert!(page.contains("<a href=\"../run-7.3.4/report.html\">run-7.3.4</a>"), "each kernel links its run");
    assert!(page.contains("Stale explanations") && page.contains("suites/atlas-explained.tsv:13"));
    assert!(!page.contains("<script"), "static");
}

#[test]
fn kcidb_has_a_checkout_per_kernel_and_a_build_per_kernel_and_arch() {
    let runs = three();
    let all = [(&runs.0, "file:///r/a".to_string()), (&runs.1, "file:///r/b".into()), (&runs.2, "file:///r/c".into())];
    let v: serde_json::Value = serde_json::from_slice(&render::kcidb(&all).unwrap()).unwrap();
    assert_eq!(v["version"]["major"], 5);
    assert_eq!(v["checkouts"].as_array().unwrap().len(), 3);
    assert_eq!(v["builds"].as_array().unwrap().len(), 6);
    let tests = v["tests"].as_array().unwrap();
    let scenarios = tests.iter().filter(|t| t["path"].as_str().is_some_and(|p| p != "user_events.boot")).count();
    assert_eq!(scenarios, 29, "every cell a test");
    let ids: std::collections::BTreeSet<&str> = tests.iter().filter_map(|t| t["id"].as_str()).collect();
    assert_eq!(ids.len(), tests.len(), "test ids are unique across the runs");
}

#[test]
fn the_summary_counts_and_lists_what_fails() {
    let runs = three();
    let g = grid_of(&runs);
    let j = judge(&g, &[row(13, "s/same", "*", ">=7.3", "test", "t")]);
    let s = render::summary(&g, &j);
    assert!(s.starts_with("atlas: 3 kernel(s) x 2 arch(es): debian (6.12.117), debian-7.2 (7.2.13), debian-7.3 (7.3.4) on x86_64, arm64\n"), "{s}");
    assert!(
        s.contains(
            "rows: 5 (1 uniform, 4 differing); differing cells: 7 (3 explained, 4 unexplained); stale explanations: 1"
        ),
        "{s}"
    );
    assert!(s.contains("  UNEXPLAINED s/gone on debian-7.3 arm64: missing (against debian-7.2 arm64: pass, debian-7.3 x86_64: pass)\n"), "{s}");
    assert!(s.contains("  STALE suites/atlas-explained.tsv:13: s/same * >=7.3 test"), "{s}");
    assert!(!s.contains("requires:"), "explained cells are in the files, not the summary: {s}");
    assert!(s.contains("run debian-7.3: ../run-7.3.4"), "{s}");
}

#[test]
fn an_arch_no_run_has_is_no_column() {
    let a = run("6.12.117", &[("x86_64", &[("s/a", Status::Pass, None)])]);
    let b = run("7.3.4", &[("x86_64", &[("s/a", Status::Pass, None)])]);
    let grid = Grid::build(&[kernel("debian", &a), kernel("debian-7.3", &b)], &["x86_64", "arm64", "s390x"]);
    assert_eq!(grid.arches, ["x86_64"]);
    assert!(grid.differing().is_empty(), "{:?}", grid.differing());
    // An arch one kernel has is a column, missing on the other: that cell differs.
    let c = run("7.3.4", &[("x86_64", &[("s/a", Status::Pass, None)]), ("arm64", &[("s/a", Status::Pass, None)])]);
    let grid = Grid::build(&[kernel("debian", &a), kernel("debian-7.3", &c)], &["x86_64", "arm64", "s390x"]);
    assert_eq!(grid.arches, ["x86_64", "arm64"]);
    assert_eq!(differing(&grid).len(), 2, "{:?}", differing(&grid));
}
