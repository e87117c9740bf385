//! perf steps: a tracepoint perf event per user event, sampled with PERF_SAMPLE_IP and
//! PERF_SAMPLE_RAW into an mmap'd ring buffer, and credentials changes (uid, gid, kept
//! capabilities).

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

use protocol::{Expect, PerfAction, Record, Value};

use crate::steps::outcome::{check_result, errno, errno_text, StepOutcome};

const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_SAMPLE_IP: u64 = 1;
const PERF_SAMPLE_RAW: u64 = 1 << 10;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_SAMPLE: u32 = 9;
/// `_IO('$', 0)`, `_IO('$', 1)`, `_IOW('$', 6, char *)` on LP64.
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
const PERF_EVENT_IOC_SET_FILTER: libc::c_ulong = 0x4008_2406;
/// Data pages of the ring buffer (a power of two).
const DATA_PAGES: usize = 8;
/// `PERF_ATTR_SIZE_VER7`: every field this agent sets is inside it.
const ATTR_SIZE: usize = 128;

/// A scenario's open perf events, by name.
pub type PerfEvents = HashMap<String, PerfEvent>;

/// One open perf event and its ring buffer.
pub struct PerfEvent {
    pub fd: OwnedFd,
    ring: *mut u8,
    ring_len: usize,
    page: usize,
    /// The tracepoint id, which is also the `type` of its trace entries.
    id: u64,
    /// `SYSTEM/NAME`, for its `format` file.
    event: String,
}

impl Drop for PerfEvent {
    fn drop(&mut self) {
        // SAFETY: `ring` was returned by mmap with `ring_len` and is unmapped only here.
        unsafe { libc::munmap(self.ring.cast(), self.ring_len) };
    }
}

/// The `perf_event_attr` for sampling every record of tracepoint `id` with its instruction
/// pointer and its raw data.
pub fn attr(id: u64, disabled: bool) -> [u8; ATTR_SIZE] {
    let mut a = [0u8; ATTR_SIZE];
    a[0..4].copy_from_slice(&PERF_TYPE_TRACEPOINT.to_ne_bytes());
    a[4..8].copy_from_slice(&(ATTR_SIZE as u32).to_ne_bytes());
    a[8..16].copy_from_slice(&id.to_ne_bytes());
    a[16..24].copy_from_slice(&1u64.to_ne_bytes()); // sample_period
    a[24..32].copy_from_slice(&(PERF_SAMPLE_IP | PERF_SAMPLE_RAW).to_ne_bytes());
    // The flags word's first bit-field is `disabled:1`: C bit-fields fill a word from its least
    // significant bit on little-endian CPUs and from its most significant on big-endian.
    let disabled_bit = if cfg!(target_endian = "big") { 1u64 << 63 } else { 1 };
    a[40..48].copy_from_slice(&(if disabled { disabled_bit } else { 0 }).to_ne_bytes());
    a[48..52].copy_from_slice(&1u32.to_ne_bytes()); // wakeup_events
    a
}

/// Why [`open_ring`] failed: perf_event_open's errno, or the mapping's.
pub enum RingError {
    Open(i32),
    Map(i32),
}

/// `perf_event_open` of tracepoint `id` for this process on any CPU, sampling every record
/// with PERF_SAMPLE_IP and PERF_SAMPLE_RAW, and its ring buffer of `data_pages` pages mapped: the descriptor,
/// the mapping (unmapped by its owner), its length and the page size.
pub fn open_ring(id: u64, disabled: bool, data_pages: usize) -> Result<(OwnedFd, *mut u8, usize, usize), RingError> {
    let a = attr(id, disabled);
    // SAFETY: `a` is a valid perf_event_attr of the size it states; the kernel only reads it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            a.as_ptr(),
            0 as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(RingError::Open(errno()));
    }
    // SAFETY: the syscall returned a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let len = page * (1 + data_pages);
    // SAFETY: a fresh shared mapping of the perf fd; checked for MAP_FAILED below.
    let ring = unsafe {
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0)
    };
    if ring == libc::MAP_FAILED {
        return Err(RingError::Map(errno()));
    }
    Ok((fd, ring.cast(), len, page))
}

pub fn open(
    events: &mut PerfEvents,
    name: &str,
    event: &str,
    disabled: bool,
    expect: &Expect,
    say: &mut dyn FnMut(&str),
) -> StepOutcome {
    let what = format!("perf open {event}{} as {name}", if disabled { " disabled" } else { "" });
    let id_path = format!("/sys/kernel/tracing/events/{event}/id");
    let mut text = String::new();
    let id = match File::open(&id_path).and_then(|mut f| f.read_to_string(&mut text)) {
        Ok(_) => match text.trim().parse::<u64>() {
            Ok(id) => id,
            Err(_) => {
                say(&format!("{what}: {id_path} holds {text:?}, not an id"));
                return StepOutcome::Fail;
            }
        },
        Err(e) => {
            say(&format!("{what}: {id_path}: {}", crate::runtime::sys::error_name(&e)));
            return StepOutcome::Fail;
        }
    };
    let (fd, ring, ring_len, page) = match open_ring(id, disabled, DATA_PAGES) {
        Ok(opened) => opened,
        Err(RingError::Open(errno)) => return check_result(&what, &errno_text(errno), Err(errno), expect, say),
        Err(RingError::Map(errno)) => {
            say(&format!("{what}: mmap of the ring buffer: {}", errno_text(errno)));
            return StepOutcome::Fail;
        }
    };
    let event = event.to_string();
    events.insert(name.to_string(), PerfEvent { fd, ring, ring_len, page, id, event });
    check_result(&what, &format!("ok, tracepoint id {id}"), Ok(0), expect, say)
}

pub fn control(
    events: &mut PerfEvents,
    name: &str,
    action: PerfAction,
    expect: &Expect,
    say: &mut dyn FnMut(&str),
) -> StepOutcome {
    let what = format!("perf {action:?} {name}").to_lowercase();
    if action == PerfAction::Close {
        return match events.remove(name) {
            Some(_) => check_result(&what, "ok", Ok(0), expect, say),
            None => {
                say(&format!("{what}: no such perf event"));
                StepOutcome::Fail
            }
        };
    }
    let Some(ev) = events.get(name) else {
        say(&format!("{what}: no such perf event"));
        return StepOutcome::Fail;
    };
    let request = if action == PerfAction::Enable { PERF_EVENT_IOC_ENABLE } else { PERF_EVENT_IOC_DISABLE };
    // SAFETY: these ioctls take no pointer argument.
    let r = unsafe { libc::ioctl(ev.fd.as_raw_fd(), request as _, 0) };
    let result = if r < 0 { Err(errno()) } else { Ok(i64::from(r)) };
    let got = result.map_or_else(errno_text, |_| "ok".to_string());
    check_result(&what, &got, result, expect, say)
}

pub fn filter(
    events: &PerfEvents,
    name: &str,
    filter: &str,
    expect: &Expect,
    say: &mut dyn FnMut(&str),
) -> StepOutcome {
    let what = format!("perf filter {name} {filter:?}");
    let Some(ev) = events.get(name) else {
        say(&format!("{what}: no such perf event"));
        return StepOutcome::Fail;
    };
    let Ok(text) = std::ffi::CString::new(filter) else {
        say(&format!("{what}: the filter holds a NUL"));
        return StepOutcome::Fail;
    };
    // SAFETY: the kernel reads a NUL-terminated string from a live CString.
    let r = unsafe { libc::ioctl(ev.fd.as_raw_fd(), PERF_EVENT_IOC_SET_FILTER as _, text.as_ptr()) };
    let result = if r < 0 { Err(errno()) } else { Ok(i64::from(r)) };
    let got = result.map_or_else(errno_text, |_| "ok".to_string());
    check_result(&what, &got, result, expect, say)
}

/// Copies `len` bytes from the ring's data area at `pos`, wrapping around its end.
fn ring_bytes(data: &[u8], pos: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| data[((pos as usize) + i) % data.len()]).collect()
}

/// One PERF_RECORD_SAMPLE: the instruction pointer and the raw data.
#[derive(Debug, PartialEq)]
pub struct Sample {
    pub ip: u64,
    pub raw: Vec<u8>,
}

/// Splits the records between `tail` and `head` into samples, counting lost records.
pub fn samples(data: &[u8], mut tail: u64, head: u64) -> (Vec<Sample>, u64) {
    let mut out = Vec::new();
    let mut lost = 0;
    while tail + 8 <= head {
        let header = ring_bytes(data, tail, 8);
        let kind = u32::from_ne_bytes(header[0..4].try_into().unwrap());
        let size = u16::from_ne_bytes(header[6..8].try_into().unwrap()) as usize;
        if size < 8 {
            break;
        }
        let record = ring_bytes(data, tail, size);
        match kind {
            // The fields in sample_type's bit order: ip (u64), then raw (u32 size, data).
            PERF_RECORD_SAMPLE if size >= 20 => {
                let ip = u64::from_ne_bytes(record[8..16].try_into().unwrap());
                let raw = u32::from_ne_bytes(record[16..20].try_into().unwrap()) as usize;
                out.push(Sample { ip, raw: record[20..(20 + raw).min(size)].to_vec() });
            }
            PERF_RECORD_LOST if size >= 24 => lost += u64::from_ne_bytes(record[16..24].try_into().unwrap()),
            _ => {}
        }
        tail += size as u64;
    }
    (out, lost)
}

/// Checks that each sample's instruction pointer lies in one of the functions `within`
/// (a symbol's `.isra.0`-style suffix ignored).
fn check_ips(what: &str, ips: &[u64], within: &[String], say: &mut dyn FnMut(&str)) -> bool {
    let kallsyms = match crate::steps::kallsyms::read() {
        Ok(text) => text,
        Err(e) => {
            say(&format!("{what}: {e}"));
            return false;
        }
    };
    let mut ok = true;
    for (i, ip) in ips.iter().enumerate() {
        let found = crate::steps::kallsyms::text_symbol(&kallsyms, *ip);
        let function = found.map(|(name, _)| crate::steps::kallsyms::function_of(name));
        let place = found.map_or_else(|| "no text symbol".to_string(), |(name, off)| format!("{name}+{off:#x}"));
        if function.is_some_and(|f| within.iter().any(|w| w == f)) {
            say(&format!("{what}: sample {} ip {ip:#x} is in {place}", i + 1));
        } else {
            ok = false;
            say(&format!("{what}: sample {} ip {ip:#x} is in {place}, expected one of {}", i + 1, within.join(", ")));
        }
    }
    ok
}

/// The `perf_read` step: `samples` compares raw bytes, `records` decoded fields (one of them);
/// `ip_in` the functions each sample's instruction pointer must be in.
pub fn read(
    events: &mut PerfEvents,
    name: &str,
    raw_form: Option<&[Vec<Value>]>,
    records: Option<&[Record]>,
    ip_in: Option<&[String]>,
    say: &mut dyn FnMut(&str),
) -> StepOutcome {
    let what = format!("perf read {name}");
    let Some(ev) = events.get(name) else {
        say(&format!("{what}: no such perf event"));
        return StepOutcome::Fail;
    };
    // SAFETY: the first page is the kernel's perf_event_mmap_page; data_head is at 1024 and
    // data_tail at 1032, both u64, and the data pages follow the first page.
    let (found, lost) = unsafe {
        let head_ptr = ev.ring.add(1024).cast::<u64>();
        let tail_ptr = ev.ring.add(1032).cast::<u64>();
        let head = std::ptr::read_volatile(head_ptr);
        fence(Ordering::Acquire);
        let tail = std::ptr::read_volatile(tail_ptr);
        let data = std::slice::from_raw_parts(ev.ring.add(ev.page), ev.ring_len - ev.page);
        let found = samples(data, tail, head);
        fence(Ordering::Release);
        std::ptr::write_volatile(tail_ptr, head);
        found
    };
    let ips: Vec<u64> = found.iter().map(|s| s.ip).collect();
    let ips_ok = |say: &mut dyn FnMut(&str)| ip_in.is_none_or(|within| check_ips(&what, &ips, within, say));
    let raws: Vec<Vec<u8>> = found.into_iter().map(|s| s.raw).collect();
    let want = match (raw_form, records) {
        (Some(want), None) => want,
        (None, Some(records)) => {
            say(&format!("{what}: {} sample(s), {lost} lost (expected {})", raws.len(), records.len()));
            let format = match crate::steps::format::load(&ev.event) {
                Ok(f) => f,
                Err(e) => {
                    say(&format!("{what}: {e}"));
                    return StepOutcome::Fail;
                }
            };
            let outcome =
                crate::steps::format::check_records(&what, &format, &raws, records, crate::steps::format::tid(), say);
            let ips_ok = ips_ok(say);
            return if lost == 0 && ips_ok { outcome } else { StepOutcome::Fail };
        }
        _ => {
            say(&format!("{what}: give `samples` or `records`, not both or neither"));
            return StepOutcome::Fail;
        }
    };
    say(&format!("{what}: {} sample(s), {lost} lost (expected {})", raws.len(), want.len()));
    let mut ok = lost == 0 && raws.len() == want.len();
    for (i, raw) in raws.iter().enumerate() {
        let hex: String = raw.iter().take(48).map(|b| format!("{b:02x}")).collect();
        let Some(fields) = want.get(i) else {
            say(&format!("{what}: unexpected sample {}: {hex}", i + 1));
            continue;
        };
        let expected: Vec<u8> = match fields.iter().map(Value::encode).collect::<Result<Vec<_>, _>>() {
            Ok(parts) => parts.concat(),
            Err(e) => {
                say(&format!("{what}: {e}"));
                return StepOutcome::Fail;
            }
        };
        let kind = raw.get(0..2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
        let payload = raw.get(8..8 + expected.len());
        let padding = raw.len().saturating_sub(8 + expected.len());
        let matches = kind == Some(ev.id as u16) && payload == Some(expected.as_slice()) && padding < 8;
        if !matches {
            ok = false;
            let want_hex: String = expected.iter().map(|b| format!("{b:02x}")).collect();
            say(&format!(
                "{what}: sample {}: raw {hex} ({} bytes), expected type {} and payload {want_hex} after the 8-byte entry",
                i + 1,
                raw.len(),
                ev.id
            ));
        }
    }
    if ips_ok(say) && ok {
        StepOutcome::Pass
    } else {
        StepOutcome::Fail
    }
}

/// Capability names this agent knows (the ones user_events and tracefs care about).
const CAPS: &[(&str, u32)] = &[
    ("CAP_CHOWN", 0),
    ("CAP_DAC_OVERRIDE", 1),
    ("CAP_DAC_READ_SEARCH", 2),
    ("CAP_FOWNER", 3),
    ("CAP_SETGID", 6),
    ("CAP_SETUID", 7),
    ("CAP_SYS_PTRACE", 19),
    ("CAP_SYS_ADMIN", 21),
    ("CAP_PERFMON", 38),
    ("CAP_BPF", 39),
];

/// Becomes `uid`/`gid` keeping only `keep` capabilities.
pub fn credentials(uid: u32, gid: Option<u32>, keep: &[String], say: &mut dyn FnMut(&str)) -> StepOutcome {
    let gid = gid.unwrap_or(uid);
    let what = format!("credentials uid {uid} gid {gid} keeping [{}]", keep.join(", "));
    let mut bits = [0u32; 2];
    for name in keep {
        let Some((_, n)) = CAPS.iter().find(|(c, _)| c == name) else {
            say(&format!("{what}: unknown capability {name}"));
            return StepOutcome::Fail;
        };
        bits[(n / 32) as usize] |= 1 << (n % 32);
    }
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // SAFETY: plain syscalls on this process's credentials with valid arguments.
    let failed = unsafe {
        let mut failed = None;
        if !keep.is_empty() && libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0 {
            failed = Some("prctl(PR_SET_KEEPCAPS)");
        } else if libc::setgroups(0, std::ptr::null()) != 0 {
            failed = Some("setgroups");
        } else if libc::setresgid(gid, gid, gid) != 0 {
            failed = Some("setresgid");
        } else if libc::setresuid(uid, uid, uid) != 0 {
            failed = Some("setresuid");
        } else {
            // Always: uid 0 keeps every capability through setresuid(), so `keep_caps` empty
            // must still drop them all, as it does for any other uid.
            let header = Header { version: 0x2008_0522, pid: 0 };
            let data = [0, 1].map(|i| Data { effective: bits[i], permitted: bits[i], inheritable: 0 });
            if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) != 0 {
                failed = Some("capset");
            }
        }
        failed
    };
    match failed {
        Some(call) => {
            say(&format!("{what}: {call}: {}", errno_text(errno())));
            StepOutcome::Fail
        }
        None => {
            say(&format!("{what}: ok"));
            StepOutcome::Pass
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_sets_type_config_sampling_and_disabled() {
        let a = attr(1234, true);
        assert_eq!(u32::from_ne_bytes(a[0..4].try_into().unwrap()), 2);
        assert_eq!(u32::from_ne_bytes(a[4..8].try_into().unwrap()), 128);
        assert_eq!(u64::from_ne_bytes(a[8..16].try_into().unwrap()), 1234);
        assert_eq!(u64::from_ne_bytes(a[24..32].try_into().unwrap()), 1 << 10 | 1);
        assert_eq!(u64::from_ne_bytes(a[40..48].try_into().unwrap()) & 1, 1);
        assert_eq!(u64::from_ne_bytes(attr(1, false)[40..48].try_into().unwrap()) & 1, 0);
    }

    fn sample(ip: u64, raw: &[u8]) -> Vec<u8> {
        let size = (8 + 8 + 4 + raw.len()) as u16;
        let mut r = Vec::new();
        r.extend_from_slice(&PERF_RECORD_SAMPLE.to_ne_bytes());
        r.extend_from_slice(&0u16.to_ne_bytes());
        r.extend_from_slice(&size.to_ne_bytes());
        r.extend_from_slice(&ip.to_ne_bytes());
        r.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
        r.extend_from_slice(raw);
        r
    }

    #[test]
    fn samples_are_split_across_the_ring_end() {
        let one = sample(0xffff_0001, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        let two = sample(7, &[9; 12]);
        // Lay the two records out starting 8 bytes before the end of a 64-byte ring.
        let mut data = vec![0u8; 64];
        let stream: Vec<u8> = [one.clone(), two.clone()].concat();
        let start = 56u64;
        for (i, b) in stream.iter().enumerate() {
            data[(start as usize + i) % 64] = *b;
        }
        let (found, lost) = samples(&data, start, start + stream.len() as u64);
        assert_eq!(lost, 0);
        assert_eq!(
            found,
            [
                Sample { ip: 0xffff_0001, raw: vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] },
                Sample { ip: 7, raw: vec![9; 12] }
            ]
        );
    }

    #[test]
    fn unknown_capabilities_fail_before_any_change() {
        let mut lines = Vec::new();
        let v = credentials(0, None, &["CAP_NOPE".into()], &mut |l| lines.push(l.to_string()));
        assert_eq!(v, StepOutcome::Fail);
        assert!(lines[0].ends_with("unknown capability CAP_NOPE"), "{lines:?}");
    }
}
