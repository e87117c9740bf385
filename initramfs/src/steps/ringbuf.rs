//! The ftrace ring buffer as `per_cpu/cpuN/trace_pipe_raw` hands it out: each read returns one
//! sub-buffer page, laid out as `events/header_page` says, holding compressed entry headers
//! (`events/header_event`) followed by the records; this splits the pages into records.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use protocol::Record;

use crate::steps::format::{self, parse_fields, Field, Format};
use crate::steps::outcome::StepOutcome;

const TRACING: &str = "/sys/kernel/tracing";

/// `type_len` values of the entry header (`include/linux/ring_buffer.h`, `events/header_event`).
const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
/// Bits of the compressed time delta; larger deltas come in a time extend.
const TS_SHIFT: u32 = 27;
/// Flags in the page's commit word: events were lost before this page, and their count is
/// stored right after the data.
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;
/// The top five bits of a full timestamp, which an absolute time stamp entry leaves out.
const TS_MSB: u64 = 0xf8 << 56;

/// Where a sub-buffer page keeps its timestamp, commit word and data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    timestamp: (usize, usize),
    commit: (usize, usize),
    data: (usize, usize),
}

impl Layout {
    /// From the text of `events/header_page`.
    pub fn parse(header_page: &str) -> Result<Layout, String> {
        let fields = parse_fields(header_page)?;
        let slot = |name: &str| -> Result<(usize, usize), String> {
            let f: &Field =
                fields.iter().find(|f| f.name == name).ok_or_else(|| format!("header_page has no field `{name}`"))?;
            Ok((f.offset, f.size))
        };
        let layout = Layout { timestamp: slot("timestamp")?, commit: slot("commit")?, data: slot("data")? };
        for (name, (_, size)) in [("timestamp", layout.timestamp), ("commit", layout.commit)] {
            if ![4, 8].contains(&size) {
                return Err(format!("header_page field `{name}` has size {size}, not 4 or 8"));
            }
        }
        Ok(layout)
    }

    /// The size of a whole sub-buffer page (what one read of `trace_pipe_raw` returns).
    pub fn page_size(&self) -> usize {
        self.data.0 + self.data.1
    }
}

/// One record: the trace entry and the payload, padded to 4 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The ring buffer's clock at the record.
    pub ts: u64,
    pub data: Vec<u8>,
}

/// The records of one page and what it says about lost events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub entries: Vec<Entry>,
    /// Events lost before this page: `Some(n)`, `Some(0)` when the kernel had no room to store
    /// the count.
    pub missed: Option<u64>,
}

/// An integer of the page, in the CPU's byte order (the kernel writes its pages natively).
fn ne(bytes: &[u8]) -> u64 {
    let fold = |acc: u64, b: &u8| (acc << 8) | u64::from(*b);
    if cfg!(target_endian = "big") {
        bytes.iter().fold(0, fold)
    } else {
        bytes.iter().rev().fold(0, fold)
    }
}

fn word(data: &[u8], at: usize) -> Result<u32, String> {
    data.get(at..at + 4).map(|b| ne(b) as u32).ok_or_else(|| format!("an entry header at {at} runs past the data"))
}

/// `struct ring_buffer_event`'s `u32 type_len:5, time_delta:27`: C bit-fields fill a word from
/// its least significant bit on little-endian CPUs and from its most significant on big-endian.
fn split_header(header: u32) -> (u32, u64) {
    if cfg!(target_endian = "big") {
        (header >> 27, u64::from(header & 0x07ff_ffff))
    } else {
        (header & 0x1f, u64::from(header >> 5))
    }
}

/// Splits one sub-buffer page into its records.
pub fn parse_page(layout: &Layout, page: &[u8]) -> Result<Page, String> {
    let field = |(offset, size): (usize, usize), name: &str| {
        page.get(offset..offset + size).map(ne).ok_or_else(|| format!("a page of {} bytes has no {name}", page.len()))
    };
    let mut ts = field(layout.timestamp, "timestamp")?;
    let commit = field(layout.commit, "commit word")?;
    let size = (commit & !(MISSED_EVENTS | MISSED_STORED) & 0xffff_ffff) as usize;
    let data = page.get(layout.data.0..).unwrap_or_default();
    if size > data.len() {
        return Err(format!("commit {size} is past the page's {} data bytes", data.len()));
    }
    let missed = (commit & MISSED_EVENTS != 0).then(|| {
        if commit & MISSED_STORED != 0 {
            data.get(size..size + 8).map_or(0, ne)
        } else {
            0
        }
    });
    let data = &data[..size];
    let mut entries = Vec::new();
    let mut pos = 0;
    while pos + 4 <= size {
        let header = word(data, pos)?;
        let (type_len, delta) = split_header(header);
        let len = match type_len {
            // A null event: the rest of the page is empty.
            TYPE_PADDING if delta == 0 => break,
            // A discarded record: array[0] holds its length after the header; it moves no clock.
            TYPE_PADDING => 4 + word(data, pos + 4)? as usize,
            TYPE_TIME_EXTEND => {
                ts += (u64::from(word(data, pos + 4)?) << TS_SHIFT) + delta;
                8
            }
            TYPE_TIME_STAMP => {
                let abs = (u64::from(word(data, pos + 4)?) << TS_SHIFT) | delta;
                // rb_fix_abs_ts(): the top bits come from the full timestamp so far.
                let mut fixed = abs | (ts & TS_MSB);
                if ts & TS_MSB != 0 && fixed < ts {
                    fixed += 1 << 59;
                }
                ts = fixed;
                8
            }
            _ => {
                // Data: type_len words, or (type_len 0) array[0] bytes counting itself.
                let (start, total) = if type_len == 0 {
                    let n = word(data, pos + 4)? as usize;
                    if n < 4 {
                        return Err(format!("a record at {pos} claims {n} bytes"));
                    }
                    (pos + 8, 4 + n)
                } else {
                    (pos + 4, 4 + 4 * type_len as usize)
                };
                let record =
                    data.get(start..pos + total).ok_or_else(|| format!("a record at {pos} runs past the data"))?;
                ts += delta;
                entries.push(Entry { ts, data: record.to_vec() });
                total
            }
        };
        pos += len;
    }
    Ok(Page { entries, missed })
}

/// Everything drained from an instance's per-CPU buffers.
#[derive(Debug, Default)]
pub struct Drained {
    /// Ordered by timestamp (then CPU, then position).
    pub entries: Vec<Entry>,
    /// One line per page that reported lost events.
    pub missed: Vec<String>,
}

/// Reads every CPU's `trace_pipe_raw` under `root` (`/sys/kernel/tracing` or an instance's
/// folder) until it is empty, without blocking, consuming what it reads.
pub fn drain(root: &Path) -> Result<Drained, String> {
    let header_path = root.join("events/header_page");
    let header = format::read_text(&header_path)?;
    let layout = Layout::parse(&header).map_err(|e| format!("{}: {e}", header_path.display()))?;
    let per_cpu = root.join("per_cpu");
    let mut cpus: Vec<usize> = fs::read_dir(&per_cpu)
        .map_err(|e| format!("{}: {e}", per_cpu.display()))?
        .filter_map(|d| d.ok()?.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
        .collect();
    cpus.sort_unstable();
    let mut out = Drained::default();
    let mut sortable = Vec::new();
    for cpu in cpus {
        let path = per_cpu.join(format!("cpu{cpu}/trace_pipe_raw"));
        let mut file: File = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let mut page = vec![0u8; layout.page_size()];
        let mut number = 0;
        loop {
            let n = match file.read(&mut page) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("{}: {e}", path.display())),
            };
            number += 1;
            let parsed = parse_page(&layout, &page[..n]).map_err(|e| format!("cpu{cpu} page {number}: {e}"))?;
            match parsed.missed {
                Some(0) => out.missed.push(format!("cpu{cpu} page {number}: events were lost before it")),
                Some(count) => out.missed.push(format!("cpu{cpu} page {number}: {count} event(s) lost before it")),
                None => {}
            }
            sortable.extend(parsed.entries.into_iter().map(|e| (cpu, e)));
        }
    }
    // Stable: within a CPU the page order is the record order.
    sortable.sort_by_key(|(cpu, e)| (e.ts, *cpu));
    out.entries = sortable.into_iter().map(|(_, e)| e).collect();
    Ok(out)
}

/// What a `trace_read` step expects: `records` in order and in number, or `every` record equal to
/// one, at most `at_most` of them.
#[derive(Debug, Clone, Copy)]
pub enum Expected<'a> {
    Records(&'a [Record]),
    Every { record: &'a Record, at_most: Option<u64> },
}

/// The `trace_read` step: drains the instance's buffers and compares `event`'s records.
pub fn read_step(event: &str, instance: Option<&str>, want: Expected<'_>, say: &mut dyn FnMut(&str)) -> StepOutcome {
    let what = match instance {
        Some(i) => format!("trace read {event} in instance {i}"),
        None => format!("trace read {event}"),
    };
    let format = match format::load(event) {
        Ok(f) => f,
        Err(e) => {
            say(&format!("{what}: {e}"));
            return StepOutcome::Fail;
        }
    };
    let root = match instance {
        Some(i) => PathBuf::from(format!("{TRACING}/instances/{i}")),
        None => PathBuf::from(TRACING),
    };
    let drained = match drain(&root) {
        Ok(d) => d,
        Err(e) => {
            say(&format!("{what}: {e}"));
            return StepOutcome::Fail;
        }
    };
    let (mine, others): (Vec<Entry>, Vec<Entry>) =
        drained.entries.into_iter().partition(|e| Format::record_type(&e.data).map(u32::from) == Some(format.id));
    let (records, too_many) = match want {
        Expected::Records(records) => {
            say(&format!(
                "{what}: {} record(s) of it (expected {}), {} of other events",
                mine.len(),
                records.len(),
                others.len()
            ));
            (records.to_vec(), false)
        }
        Expected::Every { record, at_most } => {
            let bound = at_most.map_or(String::new(), |m| format!(", at most {m}"));
            say(&format!(
                "{what}: {} record(s) of it (expected each as given{bound}), {} of other events",
                mine.len(),
                others.len()
            ));
            (vec![record.clone(); mine.len()], at_most.is_some_and(|m| mine.len() as u64 > m))
        }
    };
    for line in &drained.missed {
        say(&format!("{what}: {line}"));
    }
    let raws: Vec<Vec<u8>> = mine.into_iter().map(|e| e.data).collect();
    let outcome = format::check_records(&what, &format, &raws, &records, format::tid(), say);
    if drained.missed.is_empty() && !too_many {
        outcome
    } else {
        StepOutcome::Fail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `events/header_page` of a 64-bit 6.12 kernel with 4 KiB sub-buffers.
    const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
        \tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
        \tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
        \tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;\n";

    fn header(type_len: u32, delta: u32) -> [u8; 4] {
        (type_len | (delta << 5)).to_le_bytes()
    }

    /// A page with the given timestamp, commit flags and entry bytes, zero-filled to 4 KiB.
    fn page(ts: u64, flags: u64, entries: &[u8], after: &[u8]) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&ts.to_le_bytes());
        p.extend_from_slice(&(entries.len() as u64 | flags).to_le_bytes());
        p.extend_from_slice(entries);
        p.extend_from_slice(after);
        p.resize(4096, 0);
        p
    }

    #[test]
    fn the_layout_comes_from_header_page() {
        let l = Layout::parse(HEADER_PAGE).unwrap();
        assert_eq!(l, Layout { timestamp: (0, 8), commit: (8, 8), data: (16, 4080) });
        assert_eq!(l.page_size(), 4096);
        // A 32-bit kernel's local_t is 4 bytes and the data starts at 12.
        let small = HEADER_PAGE.replace("offset:8;\tsize:8", "offset:8;\tsize:4").replace("offset:16", "offset:12");
        assert_eq!(Layout::parse(&small).unwrap().data, (12, 4080));
        assert!(Layout::parse("\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n")
            .unwrap_err()
            .contains("commit"));
    }

    #[test]
    fn pages_split_into_records_with_every_entry_kind() {
        let layout = Layout::parse(HEADER_PAGE).unwrap();
        let mut e = Vec::new();
        // A small record: type_len 3 (12 bytes), delta 5.
        e.extend_from_slice(&header(3, 5));
        e.extend_from_slice(&[1; 12]);
        // A time extend of (2 << 27) + 7.
        e.extend_from_slice(&header(TYPE_TIME_EXTEND, 7));
        e.extend_from_slice(&2u32.to_le_bytes());
        // A discarded 12-byte record: array[0] counts itself and the 4 bytes after (no clock).
        e.extend_from_slice(&header(TYPE_PADDING, 1));
        e.extend_from_slice(&8u32.to_le_bytes());
        e.extend_from_slice(&[0xee; 4]);
        // A large record: type_len 0, array[0] = 4 + 116 (itself and the data).
        e.extend_from_slice(&header(0, 1));
        e.extend_from_slice(&120u32.to_le_bytes());
        e.extend_from_slice(&[2; 116]);
        // An absolute time stamp, then a record at it.
        e.extend_from_slice(&header(TYPE_TIME_STAMP, 3));
        e.extend_from_slice(&1u32.to_le_bytes());
        e.extend_from_slice(&header(1, 0));
        e.extend_from_slice(&[3; 4]);
        let p = parse_page(&layout, &page(1000, 0, &e, &[])).unwrap();
        assert_eq!(p.missed, None);
        let got: Vec<(u64, usize, u8)> = p.entries.iter().map(|x| (x.ts, x.data.len(), x.data[0])).collect();
        let extended = 1005 + (2 << 27) + 7;
        assert_eq!(got, [(1005, 12, 1), (extended + 1, 116, 2), ((1 << 27) | 3, 4, 3)]);
    }

    #[test]
    fn null_padding_ends_a_page_and_lost_events_are_reported() {
        let layout = Layout::parse(HEADER_PAGE).unwrap();
        let mut e = Vec::new();
        e.extend_from_slice(&header(2, 1));
        e.extend_from_slice(&[9; 8]);
        e.extend_from_slice(&header(TYPE_PADDING, 0));
        e.extend_from_slice(&header(2, 1));
        let p = parse_page(&layout, &page(0, MISSED_EVENTS | MISSED_STORED, &e, &42u64.to_le_bytes())).unwrap();
        assert_eq!((p.entries.len(), p.missed), (1, Some(42)));
        assert_eq!(parse_page(&layout, &page(0, MISSED_EVENTS, &e, &[])).unwrap().missed, Some(0));
        let mut bad = Vec::new();
        bad.extend_from_slice(&header(5, 0));
        bad.extend_from_slice(&[0; 4]);
        assert!(parse_page(&layout, &page(0, 0, &bad, &[])).unwrap_err().contains("runs past"));
        let mut big = page(0, 0, &[], &[]);
        big[8..16].copy_from_slice(&5000u64.to_le_bytes());
        assert!(parse_page(&layout, &big).unwrap_err().contains("commit 5000"));
    }
}
