//! A finding as the HTML report's failure log shows it: its header with its fingerprint, its
//! excerpt, and its frames with source lines when the kernel had debug info.

use super::super::model::Finding;

/// A finding in the scenario's log: its header with its fingerprint, its excerpt, then its
/// frames with their source lines when the kernel had debug info (as `decode_stacktrace.sh`
/// prints them, an inlined caller after its callee).
pub(super) fn finding_text(text: &mut Vec<String>, f: &Finding) {
    let print = match f.fingerprint_hash.as_str() {
        "" => String::new(),
        hash => format!(", fingerprint {hash} {}", f.fingerprint),
    };
    text.push(format!("--- kernel {} (console.log line {}{print}) ---", f.kind, f.console_line));
    text.extend(f.excerpt.iter().cloned());
    if f.frames.iter().any(|x| !x.source.is_empty()) {
        text.push("--- its call trace with source lines ---".into());
        for x in &f.frames {
            match x.source.split_first() {
                None => text.push(x.frame.clone()),
                Some((first, inlined)) => {
                    text.push(format!("{} {first}", x.frame));
                    text.extend(inlined.iter().map(|i| format!("    (inlined by) {i}")));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::model::{Finding, Frame, Run};
    use super::super::super::tests::fixture;
    use super::super::render;

    #[test]
    fn a_finding_shows_its_fingerprint_and_symbolized_frames() {
        let mut run = fixture();
        let s = run.arches[0].scenarios.iter_mut().find(|s| s.status.is_failure()).unwrap();
        let frame = |f: &str, source: &[&str]| Frame {
            frame: f.into(),
            source: source.iter().map(|x| x.to_string()).collect(),
        };
        s.findings = vec![Finding {
            kind: "kasan".into(),
            fingerprint: "kasan:f<g".into(),
            fingerprint_hash: "0123456789ab".into(),
            frames: vec![frame("f+0x1/0x9", &["copy k.c:3", "f k.c:9"]), frame("g+0x2/0x9", &[])],
            ..Finding::default()
        }];
        let html = String::from_utf8(render(&run)).unwrap();
        assert!(html.contains("fingerprint 0123456789ab kasan:f&lt;g) ---"), "{html}");
        assert!(html.contains("f+0x1/0x9 copy k.c:3\n    (inlined by) f k.c:9\ng+0x2/0x9\n"));
        without_sources(&mut run);
        let html = String::from_utf8(render(&run)).unwrap();
        assert!(!html.contains("with source lines"), "no debug info: the excerpt says it all");
    }

    fn without_sources(run: &mut Run) {
        for f in run.arches.iter_mut().flat_map(|a| a.scenarios.iter_mut()).flat_map(|s| s.findings.iter_mut()) {
            f.frames.iter_mut().for_each(|x| x.source.clear());
        }
    }
}
