//! `run.json`: the model itself, pretty-printed, with a trailing newline.

use anyhow::Result;

use super::model::Run;

pub fn render(run: &Run) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(run)?;
    bytes.push(b'\n');
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::super::model::{Status, SCHEMA_VERSION};
    use super::super::tests::{check_golden, fixture};
    use super::*;

    #[test]
    fn golden() {
        check_golden("run.json", &render(&fixture()).unwrap());
    }

    #[test]
    fn the_fixture_holds_every_status_and_its_provenance() {
        let run = fixture();
        assert_eq!(run.schema_version, SCHEMA_VERSION);
        let statuses: std::collections::BTreeSet<Status> =
            run.arches.iter().flat_map(|a| a.scenarios.iter().map(|s| s.status)).collect();
        assert_eq!(statuses.into_iter().collect::<Vec<_>>(), Status::ALL);
        let x86 = run.arch("x86_64").unwrap();
        assert_eq!(
            x86.boots.iter().map(|b| b.name.as_str()).collect::<Vec<_>>(),
            ["x86_64", "x86_64.isolated-1", "x86_64.isolated-2"]
        );
        let k = x86.kernel.as_ref().unwrap();
        assert_eq!(k.release, "6.12.117");
        assert_eq!(k.patches.len(), 1);
        assert_eq!(
            x86.boots[0].qemu_version.as_deref(),
            Some("QEMU emulator version 10.0.3 (Debian 1:10.0.3+ds-2~bpo12+1)")
        );
        assert_eq!(run.verdict.kind, "kernel-panic");
        assert_eq!(run.verdict.exit_code(), 1);
        let arm = run.arch("arm64").unwrap();
        let skipped = arm.scenario("compat/needs-compat").unwrap();
        assert_eq!((skipped.status, skipped.boot.as_deref()), (Status::Skip, None));
    }
}
