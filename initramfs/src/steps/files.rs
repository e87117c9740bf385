//! The file steps: `write_file` (one write(2), as tracefs control files want, retried for
//! asynchronous effects), `read_file` (the whole file, compared exactly, by line or by text,
//! retried for asynchronous effects), `mkdir` and `rmdir`.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use protocol::Expect;

use crate::steps::outcome::{check_result, errno_text, StepOutcome};

/// How many lines of a file a failed `read_file` shows.
pub const SHOWN_LINES: usize = 20;

/// How `write_file` opens.
#[derive(Debug, Default, Clone, Copy)]
pub struct Mode {
    pub create: bool,
    pub append: bool,
}

/// `Step::WriteFile`: [`write_once`], again every millisecond while it does not pass, for up to
/// `within_ms`. Only the last attempt's lines are said, then how many retries it took.
pub fn write_file(
    path: &Path,
    data: &[u8],
    mode: Mode,
    expect: &Expect,
    within_ms: u64,
    say: &mut dyn FnMut(&str),
) -> StepOutcome {
    let started = Instant::now();
    let mut retries = 0;
    loop {
        let mut lines = Vec::new();
        let outcome = write_once(path, data, mode, expect, &mut |l| lines.push(l.to_string()));
        let waited = started.elapsed();
        if outcome == StepOutcome::Pass || waited >= Duration::from_millis(within_ms) {
            for line in &lines {
                say(line);
            }
            if within_ms > 0 {
                say(&format!(
                    "write {}: {retries} retries in {} ms (allowed {within_ms} ms)",
                    path.display(),
                    waited.as_millis()
                ));
            }
            return outcome;
        }
        retries += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One write(2) of all of `data`, as tracefs control files want: no create, no truncate
/// (O_TRUNC has side effects there, clearing `trace` or every dynamic event), unless `create`,
/// which creates or replaces an ordinary file (or, with `append`, creates or appends).
pub fn write_once(path: &Path, data: &[u8], mode: Mode, expect: &Expect, say: &mut dyn FnMut(&str)) -> StepOutcome {
    let mut what = format!("write {} to {}", shown(data), path.display());
    for (on, word) in [(mode.create, " (create)"), (mode.append, " (append)")] {
        if on {
            what.push_str(word);
        }
    }
    let opened = OpenOptions::new()
        .write(true)
        .append(mode.append)
        .create(mode.create)
        .truncate(mode.create && !mode.append)
        .open(path);
    let (result, got) = match opened {
        Err(e) => match e.raw_os_error() {
            Some(errno) => (Err(errno), format!("open: {}", errno_text(errno))),
            None => {
                say(&format!("{what}: open: {e}"));
                return StepOutcome::Fail;
            }
        },
        Ok(mut file) => match crate::steps::faults::around(|| file.write(data)) {
            Ok(n) if n == data.len() => (Ok(n as i64), "ok".to_string()),
            Ok(n) => (Ok(n as i64), format!("short write of {n} of {} bytes", data.len())),
            Err(e) => {
                let errno = e.raw_os_error().unwrap_or(0);
                (Err(errno), errno_text(errno))
            }
        },
    };
    let outcome = check_result(&what, &got, result, expect, say);
    // `ok` means the whole of `data`; a count states a short write explicitly.
    if *expect == Expect::Ok && result != Ok(data.len() as i64) {
        return StepOutcome::Fail;
    }
    outcome
}

/// Bytes as a line shows them: text quoted (`"u:ev u32 a"`) when they are UTF-8, else each
/// byte in hex (`bytes [75 3a 00 ff]`).
fn shown(data: &[u8]) -> String {
    match std::str::from_utf8(data) {
        Ok(text) => format!("{text:?}"),
        Err(_) => format!("bytes [{}]", data.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")),
    }
}

/// `mkdir(2)` or `rmdir(2)` of `path` (mode 0755).
pub fn dir_call(call: &str, path: &str, expect: &Expect, say: &mut dyn FnMut(&str)) -> StepOutcome {
    let done = if call == "mkdir" { std::fs::create_dir(path) } else { std::fs::remove_dir(path) };
    let result = done.map(|()| 0).map_err(|e| e.raw_os_error().unwrap_or(0));
    let got = match result {
        Ok(_) => "ok".to_string(),
        Err(errno) => errno_text(errno),
    };
    check_result(&format!("{call} {path}"), &got, result, expect, say)
}

/// Whether one of `lines` is `want` (trailing blanks aside), each `{any}` in `want` standing
/// for any run of characters (a timestamp, a pid), as in `kernel_log`.
fn has_line(lines: &[&str], want: &str) -> bool {
    let want = want.trim_end();
    if want.contains(protocol::KMSG_ANY) {
        lines.iter().any(|l| protocol::kmsg_matches(want, l))
    } else {
        lines.contains(&want)
    }
}

/// What a `stat` step checks: permission bits (octal text) and owner, each when given.
pub struct Owner<'a> {
    pub mode: Option<&'a str>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

/// `Step::Stat`: stat(2) of `path`, then each of `want`'s checks; the line says what was
/// found.
pub fn stat(path: &str, want: &Owner, expect: &Expect, say: &mut dyn FnMut(&str)) -> StepOutcome {
    use std::os::unix::fs::MetadataExt;
    let mode = match want.mode.map(|m| protocol::octal_mode(m).ok_or(m)).transpose() {
        Ok(m) => m,
        Err(m) => {
            say(&format!("stat {path}: mode {m:?} is not octal"));
            return StepOutcome::Fail;
        }
    };
    let meta = std::fs::metadata(path);
    let result = meta.as_ref().map(|_| 0).map_err(|e| e.raw_os_error().unwrap_or(0));
    let got = match &meta {
        Ok(m) => format!("mode {:04o} uid {} gid {}", m.mode() & 0o7777, m.uid(), m.gid()),
        Err(e) => errno_text(e.raw_os_error().unwrap_or(0)),
    };
    let what = format!("stat {path}");
    if check_result(&what, &got, result, expect, say) == StepOutcome::Fail {
        return StepOutcome::Fail;
    }
    let Ok(m) = meta else { return StepOutcome::Pass };
    let differ: Vec<String> = [
        mode.filter(|&w| w != m.mode() & 0o7777).map(|w| format!("mode {w:04o}")),
        want.uid.filter(|&w| w != m.uid()).map(|w| format!("uid {w}")),
        want.gid.filter(|&w| w != m.gid()).map(|w| format!("gid {w}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if differ.is_empty() {
        return StepOutcome::Pass;
    }
    say(&format!("{what}: {got}, but {} was expected", differ.join(", ")));
    StepOutcome::Fail
}

/// What a read file must hold (see `Step::ReadFile`); `head_hex` is the file's first bytes in hex.
pub struct Want<'a> {
    pub head_hex: Option<&'a str>,
    pub equals: Option<&'a str>,
    pub contains: &'a [String],
    pub lacks: &'a [String],
    pub includes: &'a [String],
    pub excludes: &'a [String],
}

/// `Step::ReadFile`: the file read and compared, retried quietly every millisecond for up to
/// `within_ms`, then once more saying why it failed.
pub fn read(path: &str, want: &Want, expect: &Expect, within_ms: u64, say: &mut dyn FnMut(&str)) -> StepOutcome {
    let head = match want.head_hex.map(protocol::decode_hex).transpose() {
        Ok(h) => h,
        Err(e) => {
            say(&format!("read {path}: head_hex {e}"));
            return StepOutcome::Fail;
        }
    };
    let checks = Checks {
        equals: want.equals,
        contains: want.contains,
        lacks: want.lacks,
        includes: want.includes,
        excludes: want.excludes,
        head: head.as_deref(),
    };
    let started = Instant::now();
    let deadline = started + Duration::from_millis(within_ms);
    while Instant::now() < deadline {
        if read_file(Path::new(path), &checks, expect, &mut |_| {}) == StepOutcome::Pass {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let outcome = read_file(Path::new(path), &checks, expect, say);
    if within_ms > 0 {
        say(&format!("read {path}: settled after {} ms (allowed {within_ms} ms)", started.elapsed().as_millis()));
    }
    outcome
}

/// [`Want`] with the head decoded.
struct Checks<'a> {
    head: Option<&'a [u8]>,
    equals: Option<&'a str>,
    contains: &'a [String],
    lacks: &'a [String],
    includes: &'a [String],
    excludes: &'a [String],
}

/// Reads a whole file (tracefs files until read returns 0) and compares it.
fn read_file(path: &Path, checks: &Checks, expect: &Expect, say: &mut dyn FnMut(&str)) -> StepOutcome {
    let what = format!("read {}", path.display());
    let mut content = Vec::new();
    let read = File::open(path).map_err(|e| ("open: ", e)).and_then(|mut f| {
        // Reads of 64 KiB until read returns 0, retrying EINTR: `events/header_page` and
        // `header_event` answer only a first read, which read_to_end's 32-byte probe would cut.
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match f.read(&mut buf) {
                Ok(0) => return Ok(content.len()),
                Ok(n) => content.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(("", e)),
            }
        }
    });
    let result = match read {
        Ok(n) => Ok(n as i64),
        Err((call, e)) => match e.raw_os_error() {
            Some(errno) => {
                return check_result(&what, &format!("{call}{}", errno_text(errno)), Err(errno), expect, say);
            }
            None => {
                say(&format!("{what}: {call}{e}"));
                return StepOutcome::Fail;
            }
        },
    };
    let text = String::from_utf8_lossy(&content);
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let got = format!("{} bytes, {} lines", content.len(), lines.len());
    if check_result(&what, &got, result, expect, say) == StepOutcome::Fail {
        return StepOutcome::Fail;
    }
    let mut failed = false;
    if let Some(want) = checks.head {
        if !content.starts_with(want) {
            let seen: String = content.iter().take(want.len().max(8)).map(|b| format!("{b:02x}")).collect();
            say(&format!(
                "{what}: starts with {seen}, not {}",
                want.iter().map(|b| format!("{b:02x}")).collect::<String>()
            ));
            failed = true;
        }
    }
    if let Some(want) = checks.equals {
        if content != want.as_bytes() {
            say(&format!("{what}: content is not the expected {want:?}"));
            failed = true;
        }
    }
    for want in checks.includes {
        if !text.contains(want.as_str()) {
            say(&format!("{what}: does not include {want:?}"));
            failed = true;
        }
    }
    for unwanted in checks.excludes {
        if text.contains(unwanted.as_str()) {
            say(&format!("{what}: includes {unwanted:?}"));
            failed = true;
        }
    }
    for want in checks.contains {
        if !has_line(&lines, want) {
            say(&format!("{what}: no line {want:?}"));
            failed = true;
        }
    }
    for unwanted in checks.lacks {
        if has_line(&lines, unwanted) {
            say(&format!("{what}: has line {unwanted:?}"));
            failed = true;
        }
    }
    if !failed {
        return StepOutcome::Pass;
    }
    say(&format!("{what}: first {} of {} lines:", lines.len().min(SHOWN_LINES), lines.len()));
    for line in text.lines().take(SHOWN_LINES) {
        say(&format!("| {line}"));
    }
    StepOutcome::Fail
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A wanted line is exact but for `{any}`, which stands for any text, none too.
    #[test]
    fn a_line_is_exact_but_for_any() {
        let lines = ["  ue-agent-123 [001] ..... 12.345678: mem_x: a=1", "plain"];
        assert!(has_line(&lines, "plain  "));
        assert!(!has_line(&lines, "plai"));
        assert!(has_line(&lines, "{any}: mem_x: a=1"));
        assert!(has_line(&lines, "  ue-agent-{any} [{any}] {any}: mem_x: a=1"));
        assert!(!has_line(&lines, "{any}: mem_x: a=2"));
        assert!(!has_line(&lines, "{any}: mem_y{any}"));
    }

    /// The mode and owner found pass when they are the ones wanted and fail, naming both,
    /// when not; a missing path is judged by `expect`.
    #[test]
    fn stat_checks_mode_and_owner() {
        let path = std::env::temp_dir().join(format!("ue-agent-stat-{}", std::process::id()));
        std::fs::write(&path, b"").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        // SAFETY: plain getters.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let p = path.display().to_string();
        let mut lines = Vec::new();
        let mut say = |l: &str| lines.push(l.to_string());
        let ok = Expect::default();
        let want = |mode| Owner { mode: Some(mode), uid: Some(uid), gid: Some(gid) };
        assert_eq!(stat(&p, &want("0640"), &ok, &mut say), StepOutcome::Pass);
        assert_eq!(stat(&p, &want("640"), &ok, &mut say), StepOutcome::Pass);
        assert_eq!(stat(&p, &want("0600"), &ok, &mut say), StepOutcome::Fail);
        assert_eq!(stat(&p, &want("08"), &ok, &mut say), StepOutcome::Fail);
        let other = Owner { mode: None, uid: Some(uid + 1), gid: None };
        assert_eq!(stat(&p, &other, &ok, &mut say), StepOutcome::Fail);
        std::fs::remove_file(&path).unwrap();
        let enoent: Expect = "ENOENT".parse().unwrap();
        assert_eq!(stat(&p, &Owner { mode: None, uid: None, gid: None }, &enoent, &mut say), StepOutcome::Pass);
        let found = format!("stat {p}: mode 0640 uid {uid} gid {gid}");
        assert_eq!(lines[3], format!("{found}, but mode 0600 was expected"));
        assert_eq!(lines[4], format!("stat {p}: mode \"08\" is not octal"));
        assert_eq!(lines[6], format!("{found}, but uid {} was expected", uid + 1));
    }
}
