//! `kernel_log`: what the kernel logs while steps run, read from `/dev/kmsg` (one record per
//! `read(2)`), checked against the lines a scenario expects and forbids.

use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

use protocol::{kmsg_matches, Marker};

use crate::steps::outcome::StepOutcome;

/// The kernel's log, one record per read.
const KMSG: &str = "/dev/kmsg";
/// The longest record the kernel hands out (`CONSOLE_EXT_LOG_MAX` is 8192).
const RECORD_MAX: usize = 8192;
/// How often the log is read again while waiting for a message.
const POLL: Duration = Duration::from_millis(10);

/// The message of one `/dev/kmsg` record, `PRIO,SEQ,TIME,FLAGS;MESSAGE\n` followed by
/// ` KEY=VALUE` lines: its text up to the first newline. `None` for what is not a record.
pub fn message(record: &str) -> Option<&str> {
    let (_, text) = record.split_once(';')?;
    Some(text.split('\n').next().unwrap_or_default())
}

/// What a `kernel_log` step expects and forbids.
pub struct Watch<'a> {
    pub expect: &'a [String],
    pub forbid: &'a [String],
    pub within_ms: u64,
    pub since_boot: bool,
}

/// Messages logged since the reader was opened (or since the oldest record kept).
struct Reader {
    file: File,
    messages: Vec<String>,
}

impl Reader {
    fn open(since_boot: bool) -> Result<Reader, String> {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(KMSG)
            .map_err(|e| format!("opening {KMSG}: {e}"))?;
        // Opened, the reader stands at the oldest record kept; SEEK_END moves it past the newest.
        if !since_boot {
            file.seek(SeekFrom::End(0)).map_err(|e| format!("seeking to the end of {KMSG}: {e}"))?;
        }
        Ok(Reader { file, messages: vec![] })
    }

    /// Reads every record logged so far.
    fn drain(&mut self) -> Result<(), String> {
        let mut buf = vec![0u8; RECORD_MAX];
        loop {
            match self.file.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    let record = String::from_utf8_lossy(&buf[..n]);
                    if let Some(m) = message(&record).filter(|m| !Marker::is_marker(m)) {
                        self.messages.push(m.to_string());
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                // EPIPE: records were overwritten before they were read; the next read goes on
                // from the oldest left.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("reading {KMSG}: {e}")),
            }
        }
    }

    fn has(&self, line: &str) -> bool {
        self.messages.iter().any(|m| kmsg_matches(line, m))
    }
}

/// Runs the steps (`run`) and checks the kernel's log meanwhile as `watch` asks.
pub fn watch(
    watch: &Watch,
    say: &mut dyn FnMut(&str),
    run: impl FnOnce(&mut dyn FnMut(&str)) -> StepOutcome,
) -> StepOutcome {
    let mut reader = match Reader::open(watch.since_boot) {
        Ok(r) => r,
        Err(e) => {
            say(&format!("kernel_log: {e}"));
            return StepOutcome::Fail;
        }
    };
    let outcome = run(say);
    if outcome != StepOutcome::Pass {
        return outcome;
    }
    let deadline = Instant::now() + Duration::from_millis(watch.within_ms);
    loop {
        if let Err(e) = reader.drain() {
            say(&format!("kernel_log: {e}"));
            return StepOutcome::Fail;
        }
        if let Some(bad) = watch.forbid.iter().find(|l| reader.has(l)) {
            let found = reader.messages.iter().find(|m| kmsg_matches(bad, m)).cloned().unwrap_or_default();
            say(&format!("kernel_log: logged {found:?}, which matches the forbidden {bad:?}"));
            return StepOutcome::Fail;
        }
        let all_in = watch.expect.iter().all(|l| reader.has(l));
        if (all_in && watch.forbid.is_empty()) || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(POLL);
    }
    match watch.expect.iter().find(|l| !reader.has(l)) {
        Some(missing) => {
            let shown = if reader.messages.is_empty() {
                "nothing".to_string()
            } else {
                reader.messages.iter().map(|m| format!("{m:?}")).collect::<Vec<_>>().join(", ")
            };
            say(&format!("kernel_log: {missing:?} was not logged within {} ms; logged: {shown}", watch.within_ms));
            StepOutcome::Fail
        }
        None => {
            let expected: Vec<String> = watch.expect.iter().map(|l| format!("{l:?}")).collect();
            let forbidden = if watch.forbid.is_empty() { String::new() } else { ", none forbidden".to_string() };
            say(&format!(
                "kernel_log: {} messages; expected: {}{forbidden}",
                reader.messages.len(),
                if expected.is_empty() { "none".to_string() } else { expected.join(", ") }
            ));
            StepOutcome::Pass
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_records_message_is_its_text_to_the_first_newline() {
        assert_eq!(
            message("4,1203,5123456,-;user_events: Unable to queue fault handler\n"),
            Some("user_events: Unable to queue fault handler")
        );
        assert_eq!(message("6,7,8,c;text; with a semicolon\n SUBSYSTEM=x\n"), Some("text; with a semicolon"));
        assert_eq!(message("no record"), None);
    }
}
