//! `kmemleak`: steps run under the kernel's leak detector (`CONFIG_DEBUG_KMEMLEAK`), and every
//! object user_events allocated during them that nothing references any more named as a
//! failure, as is a page they left pinned.

use std::time::Duration;

use crate::steps::outcome::StepOutcome;

/// kmemleak's control and report file.
const CONTROL: &str = "/sys/kernel/debug/kmemleak";
/// kmemleak reports no object younger than this (mm/kmemleak.c, `MSECS_MIN_AGE`), plus a
/// margin for the deferred frees (RCU callbacks, work items) of the last step.
const MIN_AGE: Duration = Duration::from_millis(5000 + 700);
/// A frame of an allocation's backtrace with this in its function's name is user_events' own.
const OURS: &str = "user_event";
/// The kernel's counts of pages pinned and unpinned (FOLL_PIN: what user_events does to write
/// an enable bit).
const VMSTAT: &str = "/proc/vmstat";

/// Pages pinned and not yet unpinned, from a /proc/vmstat text: `nr_foll_pin_acquired` minus
/// `nr_foll_pin_released`.
pub fn pinned(vmstat: &str) -> Option<i64> {
    let count =
        |key: &str| vmstat.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse::<i64>().ok());
    Some(count("nr_foll_pin_acquired")? - count("nr_foll_pin_released")?)
}

/// The value, or the error said (`None`).
fn said<T>(r: Result<T, String>, say: &mut dyn FnMut(&str)) -> Option<T> {
    r.map_err(|e| say(&format!("kmemleak: {e}"))).ok()
}

fn pinned_now() -> Result<i64, String> {
    let text = std::fs::read_to_string(VMSTAT).map_err(|e| format!("reading {VMSTAT}: {e}"))?;
    pinned(&text).ok_or_else(|| format!("{VMSTAT} has no nr_foll_pin_acquired and nr_foll_pin_released"))
}

/// One object of kmemleak's report.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Suspect {
    /// `unreferenced object 0x... (size N):`, as the kernel wrote it.
    pub header: String,
    /// `comm "NAME", pid N, jiffies N`.
    pub comm: String,
    /// The printable column of the hex dump.
    pub text: String,
    /// The allocation's backtrace, innermost first, each `function+0xoff/0xsize`.
    pub frames: Vec<String>,
}

impl Suspect {
    /// Whether user_events allocated it (a frame of its backtrace is one of its functions).
    pub fn ours(&self) -> bool {
        self.frames.iter().any(|f| f.contains(OURS))
    }

    /// One line: the object, who allocated it, and its backtrace from the first frame of
    /// user_events outward.
    pub fn describe(&self) -> String {
        let from = self.frames.iter().position(|f| f.contains(OURS)).unwrap_or(0);
        let caller = from.checked_sub(1).map(|i| format!("{} in ", self.frames[i])).unwrap_or_default();
        let dump = if self.text.is_empty() { String::new() } else { format!(", bytes {:?}", self.text) };
        format!(
            "{} {}{dump}, allocated by {caller}{}",
            self.header.trim_end_matches(':'),
            self.comm,
            self.frames[from..].join(" <- ")
        )
    }
}

/// The objects of a kmemleak report (the text of /sys/kernel/debug/kmemleak).
pub fn parse(report: &str) -> Vec<Suspect> {
    #[derive(PartialEq)]
    enum In {
        Head,
        Dump,
        Trace,
    }
    let mut out: Vec<Suspect> = Vec::new();
    let mut part = In::Head;
    for line in report.lines() {
        let t = line.trim();
        if t.starts_with("unreferenced object ") {
            out.push(Suspect { header: t.to_string(), ..Suspect::default() });
            part = In::Head;
            continue;
        }
        let Some(s) = out.last_mut() else { continue };
        if let Some(comm) = t.strip_prefix("comm ") {
            s.comm = format!("comm {comm}");
        } else if t.starts_with("hex dump") {
            part = In::Dump;
        } else if t.starts_with("backtrace") {
            part = In::Trace;
        } else if part == In::Dump && !t.is_empty() {
            // `6c 65 61 6b 00 ...  leak....`: the printable column after two spaces.
            if let Some((_, text)) = t.split_once("  ") {
                s.text.push_str(text.trim());
            }
        } else if part == In::Trace && !t.is_empty() {
            // 6.12 prints `function+0x1/0x2`; older kernels put `[<address>] ` before it.
            let frame = t.split_once("] ").map_or(t, |(_, f)| f);
            s.frames.push(frame.to_string());
        }
    }
    out
}

fn control(command: &str) -> Result<(), String> {
    std::fs::write(CONTROL, command).map_err(|e| format!("writing `{command}` to {CONTROL}: {e}"))
}

/// Two scans, with task stacks scanned or not. kmemleak reports an object only once its
/// checksum is the same in two scans in a row (mm/kmemleak.c: an object changed since the last
/// scan is greyed for this one), so a leak made since the last scan shows at the second.
fn scan(stacks: bool) -> Result<(), String> {
    control(if stacks { "stack=on" } else { "stack=off" })?;
    control("scan")?;
    control("scan")
}

/// Runs `steps` between cleared scans and scans after kmemleak's minimum age: passes when
/// the second finds no object of user_events unreferenced, fails naming each one it finds.
pub fn watch(say: &mut dyn FnMut(&str), steps: impl FnOnce(&mut dyn FnMut(&str)) -> StepOutcome) -> StepOutcome {
    if !std::path::Path::new(CONTROL).exists() {
        say(&format!("kmemleak: needs CONFIG_DEBUG_KMEMLEAK ({CONTROL} is missing): skipped"));
        return StepOutcome::Skip;
    }
    if let Err(e) = scan(true).and_then(|()| control("clear")) {
        say(&format!("kmemleak: {e} (kmemleak turned itself off? see the console)"));
        return StepOutcome::Fail;
    }
    let Some(pins_before) = said(pinned_now(), say) else { return StepOutcome::Fail };
    say("kmemleak: scanned and cleared; the steps now run");
    let outcome = steps(say);
    if outcome != StepOutcome::Pass {
        return outcome;
    }
    say(&format!("kmemleak: waiting {} ms, kmemleak's minimum age, then scanning", MIN_AGE.as_millis()));
    std::thread::sleep(MIN_AGE);
    // Task stacks hold stale copies of pointers the steps' calls used; scanned, they would
    // keep a leaked object "referenced".
    let scanned = scan(false);
    let restored = control("stack=on");
    let report = scanned
        .and(restored)
        .and_then(|()| std::fs::read_to_string(CONTROL).map_err(|e| format!("reading {CONTROL}: {e}")));
    let Some(report) = said(report, say) else { return StepOutcome::Fail };
    // A page pinned to write an enable bit and never unpinned is a leak kmemleak does not
    // track (pages are not slab objects): nothing else in the guest pins pages, so the steps
    // must leave the count as they found it.
    let Some(pins_after) = said(pinned_now(), say) else { return StepOutcome::Fail };
    say(&format!(
        "kmemleak: pages pinned and not unpinned (/proc/vmstat nr_foll_pin_acquired - nr_foll_pin_released): {pins_before} before the steps, {pins_after} after"
    ));
    let suspects = parse(&report);
    let ours: Vec<&Suspect> = suspects.iter().filter(|s| s.ours()).collect();
    for s in &ours {
        say(&format!("kmemleak: leaked: {}", s.describe()));
    }
    say(&format!(
        "kmemleak: {} unreferenced object(s) allocated by user_events, {} by the rest of the kernel",
        ours.len(),
        suspects.len() - ours.len()
    ));
    if ours.is_empty() && pins_after == pins_before {
        StepOutcome::Pass
    } else {
        StepOutcome::Fail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As 6.12's `print_unreferenced()` writes it (`%pS` frames), and one of an older kernel.
    const REPORT: &str = "\
unreferenced object 0xffff888003a1c2a0 (size 16):
  comm \"ue-agent\", pid 97, jiffies 4294937721
  hex dump (first 16 bytes):
    6c 65 61 6b 5f 65 76 00 00 00 00 00 00 00 00 00  leak_ev.........
  backtrace (crc 7e0b5a1c):
    __kmalloc_node_track_caller_noprof+0x1a5/0x3a0
    kstrdup+0x2d/0x60
    user_event_create+0x3b/0x150
    dyn_event_write+0x12/0x20
unreferenced object 0xffff888003b00000 (size 64):
  comm \"swapper/0\", pid 1, jiffies 4294892296
  hex dump (first 32 bytes):
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00  ................
  backtrace (crc 0):
    [<ffffffff812f0e39>] kmalloc_trace_noprof+0x1a5/0x3a0
    [<ffffffff811d3f43>] some_driver_probe+0x3b/0x150
";

    #[test]
    fn parses_each_object_with_its_backtrace() {
        let s = parse(REPORT);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].header, "unreferenced object 0xffff888003a1c2a0 (size 16):");
        assert_eq!(s[0].comm, "comm \"ue-agent\", pid 97, jiffies 4294937721");
        assert_eq!(s[0].text, "leak_ev.........");
        assert_eq!(s[0].frames.len(), 4);
        assert_eq!(s[1].frames, vec!["kmalloc_trace_noprof+0x1a5/0x3a0", "some_driver_probe+0x3b/0x150"]);
    }

    #[test]
    fn only_what_user_events_allocated_is_ours() {
        let s = parse(REPORT);
        assert!(s[0].ours());
        assert!(!s[1].ours());
        assert_eq!(
            s[0].describe(),
            "unreferenced object 0xffff888003a1c2a0 (size 16) comm \"ue-agent\", pid 97, jiffies 4294937721, \
             bytes \"leak_ev.........\", allocated by kstrdup+0x2d/0x60 in user_event_create+0x3b/0x150 <- \
             dyn_event_write+0x12/0x20"
        );
    }

    #[test]
    fn pinned_pages_are_the_pins_not_yet_released() {
        let vmstat = "nr_free_pages 1000\nnr_foll_pin_acquired 42\nnr_foll_pin_released 40\nnr_foll_pin_acquired_x 7\n";
        assert_eq!(pinned(vmstat), Some(2));
        assert_eq!(pinned("nr_free_pages 1\n"), None);
    }

    #[test]
    fn an_empty_report_has_no_suspects() {
        assert!(parse("").is_empty());
    }
}
