//! `cargo xtask coverage`: each behaviour of the ABI catalogue (`suites/catalogue.tsv`), the
//! scenarios whose `covers:` name it or its excuse (`suites/catalogue-excused.tsv`), and the
//! last result of those scenarios per arch (`results/latest/<arch>/verdict.json`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

use crate::suites::Suite;
use crate::support::exit::{error, Kind};

/// One catalogue behaviour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub id: String,
    /// How the upstream selftests cover it: `full`, `partial` or `none`.
    pub upstream: String,
    pub summary: String,
}

/// Parses `catalogue.tsv` (`id<TAB>upstream<TAB>summary`, `#` comments, a header line).
pub fn parse_catalogue(text: &str) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') || line.starts_with("id\t") {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 3 {
            return Err(error(Kind::BadInput, format!("catalogue.tsv:{}: expected 3 tab-separated fields", i + 1)));
        }
        items.push(Item { id: f[0].into(), upstream: f[1].into(), summary: f[2].into() });
    }
    Ok(items)
}

/// The excuses: item id -> why it cannot be tested from user space.
#[derive(Debug, Default)]
pub struct Excused {
    pub excused: BTreeMap<String, String>,
}

/// Parses `catalogue-excused.tsv` (`id<TAB>reason`, `#` comments).
pub fn parse_excused(text: &str) -> Result<Excused> {
    let mut excused = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((id, why)) = line.split_once('\t').filter(|(_, w)| !w.trim().is_empty()) else {
            return Err(error(Kind::BadInput, format!("catalogue-excused.tsv:{}: expected `id<TAB>reason`", i + 1)));
        };
        excused.insert(id.to_string(), why.to_string());
    }
    Ok(Excused { excused })
}

/// One row of the table.
#[derive(Debug, PartialEq, Eq)]
pub struct Row {
    pub id: String,
    /// `suite/scenario` names that cover the item.
    pub scenarios: Vec<String>,
    pub excuse: Option<String>,
    /// arch -> status of the covering scenarios in the last run (`pass`, `fail`, `pass+fail`, ...).
    pub results: BTreeMap<String, String>,
}

/// Scenario statuses of the latest run per arch: arch -> scenario name -> status.
pub type Latest = BTreeMap<String, BTreeMap<String, String>>;

pub fn table(items: &[Item], suites: &[Suite], excused: &Excused, latest: &Latest) -> Vec<Row> {
    items
        .iter()
        .map(|item| {
            let scenarios: Vec<String> = suites
                .iter()
                .flat_map(|s| s.scenarios.iter().map(move |sc| (s, sc)))
                .filter(|(_, sc)| sc.covers.iter().any(|c| c == &item.id))
                .map(|(s, sc)| format!("{}/{}", s.suite, sc.name))
                .collect();
            let results = latest
                .iter()
                .filter_map(|(arch, statuses)| {
                    let mut seen: Vec<&str> =
                        scenarios.iter().filter_map(|n| statuses.get(n).map(String::as_str)).collect();
                    seen.sort_unstable();
                    seen.dedup();
                    (!seen.is_empty()).then(|| (arch.clone(), seen.join("+")))
                })
                .collect();
            Row { id: item.id.clone(), scenarios, excuse: excused.excused.get(&item.id).cloned(), results }
        })
        .collect()
}

/// `covers:` ids and excuse ids that name no catalogue item.
pub fn unknown_ids(items: &[Item], suites: &[Suite], excused: &Excused) -> Vec<String> {
    let known = |id: &str| items.iter().any(|i| i.id == id);
    let mut out = Vec::new();
    for s in suites {
        for sc in &s.scenarios {
            for c in sc.covers.iter().filter(|c| !known(c)) {
                out.push(format!("{}/{} covers {c}, which is not in the catalogue", s.suite, sc.name));
            }
        }
    }
    for id in excused.excused.keys().filter(|id| !known(id)) {
        out.push(format!("catalogue-excused.tsv excuses {id}, which is not in the catalogue"));
    }
    out
}

/// Reads the latest run's verdicts per arch: `results/latest/<arch>/verdict.json` and those of
/// the arch's other boots (`<arch>.vm-<k>/`, `<arch>.isolated-<n>/`).
pub fn latest(results: &Path) -> Latest {
    let mut out = Latest::new();
    let folders =
        crate::judging::run_folder::boot_folders(&results.join(crate::judging::run_folder::LATEST)).unwrap_or_default();
    for folder in folders {
        let (Some((arch, _)), Ok((_, scenarios))) = (folder.place(), crate::judging::run_folder::read_record(&folder))
        else {
            continue;
        };
        let statuses = scenarios.into_iter().filter_map(|s| Some((s.name, s.status?)));
        out.entry(arch.to_string()).or_default().extend(statuses);
    }
    out
}

/// Loads the catalogue, the excuses and the suites from the checkout.
pub fn load(root: &Path) -> Result<(Vec<Item>, Excused)> {
    let path = root.join("suites/catalogue.tsv");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let items = parse_catalogue(&text)?;
    let path = root.join("suites/catalogue-excused.tsv");
    let excused = match std::fs::read_to_string(&path) {
        Ok(text) => parse_excused(&text)?,
        Err(_) => Excused::default(),
    };
    Ok((items, excused))
}

/// The upstream selftest cases (`FILE:NAME`) and the scenarios whose `upstream:` name each.
pub fn upstream_table(cases_text: &str, suites: &[Suite]) -> Vec<(String, Vec<String>)> {
    cases_text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|case| {
            let scenarios = suites
                .iter()
                .flat_map(|s| s.scenarios.iter().map(move |sc| (s, sc)))
                .filter(|(_, sc)| sc.upstream.iter().any(|u| u == case))
                .map(|(s, sc)| format!("{}/{}", s.suite, sc.name))
                .collect();
            (case.to_string(), scenarios)
        })
        .collect()
}

/// `upstream:` names that are not cases of the upstream selftests.
pub fn unknown_upstream(cases_text: &str, suites: &[Suite]) -> Vec<String> {
    let known: Vec<&str> = cases_text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    suites
        .iter()
        .flat_map(|s| s.scenarios.iter().map(move |sc| (s, sc)))
        .flat_map(|(s, sc)| {
            sc.upstream
                .iter()
                .filter(|u| !known.contains(&u.as_str()))
                .map(move |u| format!("{}/{} names upstream {u}, which is not an upstream case", s.suite, sc.name))
        })
        .collect()
}

/// Prints the table and a summary; returns how many items are neither covered nor excused.
pub fn print(items: &[Item], rows: &[Row]) -> usize {
    let mut missing = 0;
    let (mut covered, mut excused) = (0, 0);
    for (item, row) in items.iter().zip(rows) {
        let results: Vec<String> = row.results.iter().map(|(a, s)| format!("{a}: {s}")).collect();
        let what = if !row.scenarios.is_empty() {
            covered += 1;
            format!(
                "{}  [{}]",
                row.scenarios.join(", "),
                if results.is_empty() { "no result yet".into() } else { results.join(", ") }
            )
        } else if let Some(why) = &row.excuse {
            excused += 1;
            format!("excused: {why}")
        } else {
            missing += 1;
            "NOT COVERED".to_string()
        };
        println!("{:<4} {:<7} {what}", item.id, item.upstream);
    }
    let upstream = items.iter().filter(|i| i.upstream != "none").count();
    println!(
        "{covered} of {} items covered by scenarios, {excused} excused, {missing} neither (upstream selftests: {upstream} covered fully or partly)",
        items.len()
    );
    missing
}

/// `cargo xtask coverage`: the catalogue table with the last results, then the upstream
/// selftest cases and their counterparts. Exits 128 when the suites name items or cases that
/// do not exist, 1 when an item is neither covered nor excused.
pub fn print_report(suites: &[Suite], results: &Path) -> Result<u8> {
    let root = crate::support::checkout::project_root();
    let (items, excused) = load(&root)?;
    let latest = latest(results);
    let mut problems = unknown_ids(&items, suites, &excused);
    for problem in &problems {
        eprintln!("error: {problem}");
    }
    let table = table(&items, suites, &excused, &latest);
    print(&items, &table);
    let cases = std::fs::read_to_string(root.join("suites/upstream-cases.txt")).unwrap_or_default();
    for problem in unknown_upstream(&cases, suites) {
        eprintln!("error: {problem}");
        problems.push(problem);
    }
    let uncovered: Vec<&str> =
        table.iter().filter(|r| r.scenarios.is_empty() && r.excuse.is_none()).map(|r| r.id.as_str()).collect();
    let upstream = upstream_table(&cases, suites);
    println!("\nupstream selftest case -> counterpart scenarios:");
    for (case, scenarios) in &upstream {
        let what = if scenarios.is_empty() { "NO COUNTERPART".to_string() } else { scenarios.join(", ") };
        println!("{case:<36} {what}");
    }
    let mirrored = upstream.iter().filter(|(_, s)| !s.is_empty()).count();
    println!("{mirrored} of {} upstream selftest cases have a counterpart scenario", upstream.len());
    // Honest exit codes: suites naming items or cases that do not exist are bad input;
    // an item neither covered nor excused fails the check.
    if !problems.is_empty() {
        return Ok(Kind::BadInput.code());
    }
    if !uncovered.is_empty() {
        eprintln!("error: not covered and not excused: {}", uncovered.join(", "));
        return Ok(Kind::TestFailed.code());
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite(text: &str) -> Suite {
        crate::suites::parse("t.yaml", text).unwrap()
    }

    const SUITE: &str = "suite: t\nscenarios:\n  - name: one\n    covers: [A1, A2]\n    steps: [{ sleep: { ms: 1 } }]\n  - name: two\n    covers: [A2, Z9]\n    steps: [{ sleep: { ms: 1 } }]\n";

    #[test]
    fn rows_map_items_to_scenarios_excuses_and_results() {
        let items = parse_catalogue("# c\nid\tupstream\tsummary\nA1\tnone\tx\nA2\tfull\ty\nI1\tnone\tz\n").unwrap();
        let suites = [suite(SUITE)];
        let excused = Excused { excused: [("I1".to_string(), "needs eBPF".to_string())].into() };
        let mut latest = Latest::new();
        latest.insert("arm64".into(), [("t/one".into(), "pass".into()), ("t/two".into(), "fail".into())].into());
        let rows = table(&items, &suites, &excused, &latest);
        assert_eq!(rows[0].scenarios, ["t/one"]);
        assert_eq!(rows[1].scenarios, ["t/one", "t/two"]);
        assert_eq!(rows[1].results["arm64"], "fail+pass");
        assert_eq!(rows[2].excuse.as_deref(), Some("needs eBPF"));
        assert_eq!(print(&items, &rows), 0);
        assert_eq!(unknown_ids(&items, &suites, &excused), ["t/two covers Z9, which is not in the catalogue"]);
        assert_eq!(parse_excused("# c\nM4\twhy\n").unwrap().excused["M4"], "why");
        assert!(parse_excused("M4\n").is_err());
    }

    /// Every `covers:` id in suites/ names a catalogue item, and the catalogue has all 140;
    /// every `upstream:` name is an upstream selftest case, and every case has a counterpart.
    #[test]
    fn repository_covers_name_real_items() {
        let root = crate::support::checkout::project_root();
        let (items, excused) = load(&root).unwrap();
        assert_eq!(items.len(), 140);
        let files = crate::suites::files_in(&root.join("suites")).unwrap();
        let suites = crate::suites::load_all(&files).unwrap();
        assert_eq!(unknown_ids(&items, &suites, &excused), Vec::<String>::new());
        let cases = std::fs::read_to_string(root.join("suites/upstream-cases.txt")).unwrap();
        assert_eq!(unknown_upstream(&cases, &suites), Vec::<String>::new());
        let upstream = upstream_table(&cases, &suites);
        assert_eq!(upstream.len(), 18);
        let without: Vec<&str> = upstream.iter().filter(|(_, s)| s.is_empty()).map(|(c, _)| c.as_str()).collect();
        assert_eq!(without, Vec::<&str>::new(), "upstream cases with no counterpart scenario");
    }

    /// `suites/abi-catalogue.md` (the catalogue's text, with each item's source line) and
    /// `catalogue.tsv` (its one-line summaries) name the same 140 items, in the same order.
    #[test]
    fn the_catalogue_text_and_its_table_name_the_same_items() {
        let root = crate::support::checkout::project_root();
        let (items, _) = load(&root).unwrap();
        let text = std::fs::read_to_string(root.join("suites/abi-catalogue.md")).unwrap();
        let in_text: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("**")?.split_once(".**").map(|(id, _)| id))
            .filter(|id| id.len() > 1 && id[1..].bytes().all(|b| b.is_ascii_digit()))
            .collect();
        let in_table: Vec<&str> = items.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(in_text, in_table);
    }

    /// The suites' promise: every catalogue item is covered by a scenario or excused with the
    /// reason it cannot be tested from user space.
    #[test]
    fn every_catalogue_item_is_covered_or_excused() {
        let root = crate::support::checkout::project_root();
        let (items, excused) = load(&root).unwrap();
        let files = crate::suites::files_in(&root.join("suites")).unwrap();
        let suites = crate::suites::load_all(&files).unwrap();
        let rows = table(&items, &suites, &excused, &Latest::new());
        let neither: Vec<&str> =
            rows.iter().filter(|r| r.scenarios.is_empty() && r.excuse.is_none()).map(|r| r.id.as_str()).collect();
        assert_eq!(neither, Vec::<&str>::new(), "items neither covered by a scenario nor in catalogue-excused.tsv");
    }
}
