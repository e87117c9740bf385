//! Tracefs `format` files (an event's, and `events/header_page`) parsed into fields, records
//! (ring-buffer entries, perf raw samples) decoded field by field with them, and decoded records
//! compared with a step's expected ones.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use protocol::{FieldValue, Record};

use crate::steps::outcome::StepOutcome;

/// What a field holds, which decides how it decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A scalar of 1, 2, 4 or 8 bytes in the CPU's byte order, signed as `signed:` says.
    Int,
    /// Bytes in the record itself: `char[N]` (text) or a struct (bytes).
    Fixed { text: bool },
    /// A `__data_loc` (offset from the record's start) or `__rel_loc` (offset from the end of
    /// the 4-byte loc word) array: the loc word holds the length in its high 16 bits.
    Loc { relative: bool, text: bool },
}

/// One `field:` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The type as declared, without the name and without any bracket text after the name
    /// (`unsigned short`, `char`, `__data_loc char[]`, `__rel_loc char`, `struct foo`).
    pub ty: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    pub kind: Kind,
}

/// An event's `format` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    pub name: String,
    pub id: u32,
    /// In file order: the common fields, then the event's own.
    pub fields: Vec<Field>,
}

/// A decoded field's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    Int(i128),
    /// The raw bytes of a char array or string field (shown and compared up to the first NUL).
    Text(Vec<u8>),
    Bytes(Vec<u8>),
}

impl Decoded {
    /// A text field's C string: up to the first NUL, or all of it.
    fn c_str(bytes: &[u8]) -> &[u8] {
        bytes.split(|b| *b == 0).next().unwrap_or_default()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl fmt::Display for Decoded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decoded::Int(v) => write!(f, "{v}"),
            Decoded::Text(bytes) => {
                let text = Decoded::c_str(bytes);
                write!(f, "\"{}\"", text.escape_ascii())?;
                if bytes.len() > text.len() {
                    write!(f, " (bytes {})", hex(bytes))?;
                }
                Ok(())
            }
            Decoded::Bytes(bytes) => write!(f, "{{ bytes: {} }}", hex(bytes)),
        }
    }
}

/// Parses every `field:` line of a format text (`field:TYPE NAME;\toffset:O;\tsize:S;\tsigned:B;`,
/// also `field: TYPE NAME;` as `header_page` writes it).
pub fn parse_fields(text: &str) -> Result<Vec<Field>, String> {
    text.lines()
        .filter_map(|line| line.trim_start().strip_prefix("field:"))
        .map(|rest| parse_field(rest).map_err(|e| format!("`field:{rest}`: {e}")))
        .collect()
}

fn parse_field(rest: &str) -> Result<Field, String> {
    let mut parts = rest.split(';').map(str::trim);
    let decl = parts.next().unwrap_or_default();
    let mut attrs: BTreeMap<&str, &str> = BTreeMap::new();
    for part in parts.filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once(':').ok_or_else(|| format!("`{part}` is not `key:value`"))?;
        attrs.insert(key.trim(), value.trim());
    }
    let number = |key: &str| -> Result<usize, String> {
        let value = attrs.get(key).ok_or_else(|| format!("no `{key}:`"))?;
        value.parse().map_err(|_| format!("`{key}:{value}` is not a number"))
    };
    let (offset, size, signed) = (number("offset")?, number("size")?, number("signed")? != 0);
    let (ty, name) = decl.rsplit_once(' ').ok_or_else(|| format!("`{decl}` is not `TYPE NAME`"))?;
    // `char c[5]`, `__rel_loc char e[]`: the bracket text is the kernel's `field->len`, which
    // user_events never sets (catalogue G3), so only its presence is used; `size:` is the truth.
    let (name, bracketed) = match name.split_once('[') {
        Some((n, _)) => (n, true),
        None => (name, false),
    };
    let ty = ty.trim();
    if name.is_empty() || ty.is_empty() {
        return Err(format!("`{decl}` is not `TYPE NAME`"));
    }
    let dynamic =
        ty.strip_prefix("__data_loc ").map(|t| (false, t)).or(ty.strip_prefix("__rel_loc ").map(|t| (true, t)));
    let element = dynamic.map_or(ty, |(_, t)| t);
    let element = element.split_once('[').map_or(element, |(e, _)| e).trim();
    let text = element.contains("char");
    let kind = match dynamic {
        Some((relative, _)) => Kind::Loc { relative, text },
        None if bracketed || ty.contains('[') => Kind::Fixed { text },
        None if ty.starts_with("struct ") || ![1, 2, 4, 8].contains(&size) => Kind::Fixed { text: false },
        None => Kind::Int,
    };
    if matches!(kind, Kind::Loc { .. }) && size != 4 {
        return Err(format!("a loc field of size {size}, not 4"));
    }
    Ok(Field { name: name.to_string(), ty: ty.to_string(), offset, size, signed, kind })
}

impl Format {
    /// Parses an event's `format` file: `name:`, `ID:` and the `field:` lines.
    pub fn parse(text: &str) -> Result<Format, String> {
        let header = |key: &str| {
            text.lines().find_map(|l| l.strip_prefix(key)).map(str::trim).ok_or_else(|| format!("no `{key}` line"))
        };
        let name = header("name:")?.to_string();
        let id_text = header("ID:")?;
        let id = id_text.parse().map_err(|_| format!("`ID: {id_text}` is not a number"))?;
        let fields = parse_fields(text)?;
        if fields.is_empty() {
            return Err("no `field:` lines".to_string());
        }
        Ok(Format { name, id, fields })
    }

    /// The event type a record starts with (`common_type`, a u16 at offset 0).
    pub fn record_type(record: &[u8]) -> Option<u16> {
        record.get(0..2).map(|b| u16::from_ne_bytes([b[0], b[1]]))
    }

    /// Decodes a record (the trace entry and the payload, as the ring buffer or a perf raw
    /// sample holds it; trailing alignment padding is ignored) into one value per field.
    pub fn decode(&self, record: &[u8]) -> Result<Vec<Decoded>, String> {
        self.fields.iter().map(|f| decode_field(f, record).map_err(|e| format!("field {}: {e}", f.name))).collect()
    }
}

fn slice(record: &[u8], start: usize, len: usize) -> Result<&[u8], String> {
    record
        .get(start..start + len)
        .ok_or_else(|| format!("bytes {start}..{} are past the record's end ({} bytes)", start + len, record.len()))
}

fn decode_field(field: &Field, record: &[u8]) -> Result<Decoded, String> {
    let bytes = slice(record, field.offset, field.size)?;
    Ok(match field.kind {
        Kind::Int => {
            // The record is in the guest's own byte order (the kernel wrote it natively).
            let (unsigned, bits) = match *bytes {
                [a] => (u64::from(a), 8),
                [a, b] => (u64::from(u16::from_ne_bytes([a, b])), 16),
                [a, b, c, d] => (u64::from(u32::from_ne_bytes([a, b, c, d])), 32),
                _ => (u64::from_ne_bytes(bytes.try_into().expect("int fields have 1, 2, 4 or 8 bytes")), 64),
            };
            let negative = field.signed && unsigned >> (bits - 1) & 1 == 1;
            Decoded::Int(if negative { i128::from(unsigned) - (1i128 << bits) } else { i128::from(unsigned) })
        }
        Kind::Fixed { text: true } => Decoded::Text(bytes.to_vec()),
        Kind::Fixed { text: false } => Decoded::Bytes(bytes.to_vec()),
        Kind::Loc { relative, text } => {
            let word = u32::from_ne_bytes(bytes.try_into().expect("loc fields have size 4"));
            let (offset, len) = ((word & 0xffff) as usize, (word >> 16) as usize);
            let start = if relative { field.offset + field.size + offset } else { offset };
            let data = slice(record, start, len)
                .map_err(|e| format!("loc word {word:#010x} (offset {offset}, length {len}): {e}"))?
                .to_vec();
            if text {
                Decoded::Text(data)
            } else {
                Decoded::Bytes(data)
            }
        }
    })
}

/// Shows a decoded record as `name=value` pairs, for failure messages.
pub fn show(format: &Format, values: &[Decoded]) -> String {
    format.fields.iter().zip(values).map(|(f, v)| format!("{}={v}", f.name)).collect::<Vec<_>>().join(" ")
}

/// Why a decoded value does not meet an expected one; `None` when it does. `tid` stands in for
/// the text `self` on an integer field.
fn mismatch(want: &FieldValue, got: &Decoded, tid: i64) -> Option<String> {
    let shown = match want {
        FieldValue::Unsigned(v) => v.to_string(),
        FieldValue::Signed(v) => v.to_string(),
        FieldValue::Text(t) if t == protocol::SELF_TID => format!("{tid} (self)"),
        FieldValue::Text(t) => format!("\"{}\"", t.escape_default()),
        FieldValue::Bytes { bytes } => format!("{{ bytes: {bytes} }}"),
    };
    let fits = match (want, got) {
        (FieldValue::Unsigned(w), Decoded::Int(g)) => i128::from(*w) == *g,
        (FieldValue::Signed(w), Decoded::Int(g)) => i128::from(*w) == *g,
        (FieldValue::Text(w), Decoded::Int(g)) if w == protocol::SELF_TID => i128::from(tid) == *g,
        (FieldValue::Text(w), Decoded::Text(g)) => Decoded::c_str(g) == w.as_bytes(),
        (FieldValue::Bytes { bytes }, Decoded::Text(g) | Decoded::Bytes(g)) => match protocol::decode_hex(bytes) {
            Ok(w) => w == *g,
            Err(e) => return Some(e),
        },
        _ => {
            let kind = match got {
                Decoded::Int(_) => "an integer field (expect a number, or `self`)",
                Decoded::Text(_) => "a text field (expect text, or `{ bytes: HEX }`)",
                Decoded::Bytes(_) => "a bytes field (expect `{ bytes: HEX }`)",
            };
            return Some(format!("expected {shown}, but it is {kind}: {got}"));
        }
    };
    (!fits).then(|| format!("expected {shown}, got {got}"))
}

/// Compares decoded records with the expected ones, in order: one message per difference
/// (record numbers from 1). Each expected record must name every field but the common ones
/// (`common_*`, which it may name) and no field the format lacks.
pub fn compare(format: &Format, got: &[Vec<Decoded>], want: &[Record], tid: i64) -> Vec<String> {
    let mut out = Vec::new();
    if got.len() != want.len() {
        out.push(format!("{} record(s) of {}, expected {}", got.len(), format.name, want.len()));
    }
    for (i, values) in got.iter().enumerate() {
        let n = i + 1;
        let Some(expected) = want.get(i) else {
            out.push(format!("record {n} (not expected): {}", show(format, values)));
            continue;
        };
        for name in expected.keys().filter(|k| !format.fields.iter().any(|f| &f.name == *k)) {
            out.push(format!("record {n}: {} has no field `{name}`", format.name));
        }
        for (field, value) in format.fields.iter().zip(values) {
            match expected.get(&field.name) {
                None if field.name.starts_with("common_") => {}
                None => out.push(format!("record {n}: field {} not given (it is {value})", field.name)),
                Some(w) => {
                    if let Some(why) = mismatch(w, value, tid) {
                        out.push(format!("record {n}: field {}: {why}", field.name));
                    }
                }
            }
        }
    }
    for n in got.len() + 1..=want.len() {
        out.push(format!("record {n}: missing"));
    }
    out
}

/// Reads a tracefs text file in reads of 64 KiB: `header_page` and `header_event` answer only
/// the first read (a later one at a non-zero position returns 0), so the small first read
/// that `read_to_end` makes would cut them short.
pub fn read_text(path: &Path) -> Result<String, String> {
    let failed = |e: std::io::Error| format!("{}: {}", path.display(), crate::runtime::sys::error_name(&e));
    let mut file = File::open(path).map_err(failed)?;
    let mut buf = vec![0u8; 64 << 10];
    let mut out = Vec::new();
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(failed(e)),
        }
    }
    String::from_utf8(out).map_err(|_| format!("{}: not UTF-8", path.display()))
}

/// Reads and parses `/sys/kernel/tracing/events/EVENT/format` (`EVENT` is `SYSTEM/NAME`).
pub fn load(event: &str) -> Result<Format, String> {
    let path = format!("/sys/kernel/tracing/events/{event}/format");
    Format::parse(&read_text(Path::new(&path))?).map_err(|e| format!("{path}: {e}"))
}

/// How many differences a failed comparison says, at most (a storm of records may hold thousands).
const SHOWN_DIFFERENCES: usize = 20;

/// Decodes raw records of `format`'s event and compares them with `want`, saying each
/// difference after `what`; the step's outcome. `tid` is what `self` stands for.
pub fn check_records(
    what: &str,
    format: &Format,
    raws: &[Vec<u8>],
    want: &[Record],
    tid: i64,
    say: &mut dyn FnMut(&str),
) -> StepOutcome {
    let mut decoded = Vec::new();
    let mut ok = true;
    for (i, raw) in raws.iter().enumerate() {
        let kind = Format::record_type(raw);
        if kind.map(u32::from) != Some(format.id) {
            let got = kind.map_or("none (a record too short to hold one)".to_string(), |k| k.to_string());
            say(&format!("{what}: record {}: type {got}, expected {} ({})", i + 1, format.id, format.name));
            ok = false;
        }
        match format.decode(raw) {
            Ok(values) => decoded.push(values),
            Err(e) => {
                say(&format!("{what}: record {}: {e}; raw {}", i + 1, hex(raw)));
                return StepOutcome::Fail;
            }
        }
    }
    let differences = compare(format, &decoded, want, tid);
    for line in differences.iter().take(SHOWN_DIFFERENCES) {
        say(&format!("{what}: {line}"));
        ok = false;
    }
    if differences.len() > SHOWN_DIFFERENCES {
        say(&format!("{what}: and {} more difference(s)", differences.len() - SHOWN_DIFFERENCES));
    }
    if ok {
        StepOutcome::Pass
    } else {
        StepOutcome::Fail
    }
}

/// The calling thread's id, which the kernel records as `common_pid`.
pub fn tid() -> i64 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The format of `ft_rb u8 a; u16 b; u32 c; u64 d; s32 e; char[6] s; __data_loc char[] dl;
    /// __rel_loc char[] rl; struct foo x 3; __data_loc u8[] v` as 6.12 prints it (captured for
    /// the first eight user fields), with an uninitialised array length of catalogue G3.
    const FORMAT: &str = "name: ft_rb\nID: 1432\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:u8 a;\toffset:8;\tsize:1;\tsigned:0;\n\
        \tfield:u16 b;\toffset:9;\tsize:2;\tsigned:0;\n\
        \tfield:u32 c;\toffset:11;\tsize:4;\tsigned:0;\n\
        \tfield:u64 d;\toffset:15;\tsize:8;\tsigned:0;\n\
        \tfield:s32 e;\toffset:23;\tsize:4;\tsigned:1;\n\
        \tfield:char s[-2093481424];\toffset:27;\tsize:6;\tsigned:1;\n\
        \tfield:__data_loc char[] dl;\toffset:33;\tsize:4;\tsigned:1;\n\
        \tfield:__rel_loc char rl[];\toffset:37;\tsize:4;\tsigned:1;\n\
        \tfield:struct foo x;\toffset:41;\tsize:3;\tsigned:1;\n\
        \tfield:__data_loc u8[] v;\toffset:44;\tsize:4;\tsigned:1;\n\n\
        print fmt: \"a=%u b=%u c=%u d=%llu e=%d s=%s dl=%s rl=%s x=%llu v=%llu\", REC->a, REC->b, REC->c, \
        REC->d, REC->e, REC->s, __get_str(dl), __get_rel_str(rl), REC->x, REC->v\n";

    fn record() -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&1432u16.to_ne_bytes());
        r.extend_from_slice(&[0x01, 0x00]);
        r.extend_from_slice(&77i32.to_ne_bytes());
        r.push(0xfe); // a
        r.extend_from_slice(&0xbeefu16.to_ne_bytes());
        r.extend_from_slice(&0xdead_beefu32.to_ne_bytes());
        r.extend_from_slice(&u64::MAX.to_ne_bytes());
        r.extend_from_slice(&(-5i32).to_ne_bytes());
        r.extend_from_slice(b"ab\0\0\0\0");
        r.extend_from_slice(&((3u32 << 16) | 48).to_ne_bytes()); // dl: "hi\0" at 48
        r.extend_from_slice(&((3u32 << 16) | 10).to_ne_bytes()); // rl: "yo\0" at 41 + 10
        r.extend_from_slice(&[1, 2, 3]); // x
        r.extend_from_slice(&((2u32 << 16) | 54).to_ne_bytes()); // v: 2 bytes at 54
        r.extend_from_slice(b"hi\0yo\0");
        r.extend_from_slice(&[0xa, 0xb]);
        r.extend_from_slice(&[0, 0]); // alignment padding
        r
    }

    #[test]
    fn fields_parse_with_kinds_and_garbage_array_lengths() {
        let f = Format::parse(FORMAT).unwrap();
        assert_eq!((f.name.as_str(), f.id, f.fields.len()), ("ft_rb", 1432, 14));
        let by = |n: &str| f.fields.iter().find(|x| x.name == n).unwrap().clone();
        assert_eq!(by("common_type").ty, "unsigned short");
        assert_eq!((by("common_pid").kind, by("common_pid").signed), (Kind::Int, true));
        assert_eq!((by("s").kind, by("s").size, by("s").offset), (Kind::Fixed { text: true }, 6, 27));
        assert_eq!(by("dl").kind, Kind::Loc { relative: false, text: true });
        assert_eq!((by("rl").kind, by("rl").ty.as_str()), (Kind::Loc { relative: true, text: true }, "__rel_loc char"));
        assert_eq!(by("x").kind, Kind::Fixed { text: false });
        assert_eq!(by("v").kind, Kind::Loc { relative: false, text: false });
        assert!(Format::parse("name: x\nID: 1\nformat:\n\tfield:u8 a;\toffset:8;\tsize:1;\n")
            .unwrap_err()
            .contains("signed"));
        assert!(Format::parse("name: x\nformat:\n").unwrap_err().contains("ID:"));
        assert!(parse_fields("\tfield:__data_loc char[] d;\toffset:8;\tsize:2;\tsigned:1;\n").is_err());
    }

    #[test]
    fn records_decode_field_by_field() {
        let f = Format::parse(FORMAT).unwrap();
        let values = f.decode(&record()).unwrap();
        assert_eq!(
            show(&f, &values),
            "common_type=1432 common_flags=1 common_preempt_count=0 common_pid=77 a=254 b=48879 c=3735928559 \
             d=18446744073709551615 e=-5 s=\"ab\" (bytes 616200000000) dl=\"hi\" (bytes 686900) \
             rl=\"yo\" (bytes 796f00) x={ bytes: 010203 } v={ bytes: 0a0b }"
        );
        assert_eq!(Format::record_type(&record()), Some(1432));
        let mut short = record();
        short.truncate(52);
        assert_eq!(
            f.decode(&short).unwrap_err(),
            "field rl: loc word 0x0003000a (offset 10, length 3): bytes 51..54 are past the record's end (52 bytes)"
        );
        assert!(f.decode(&record()[..20]).unwrap_err().starts_with("field d: bytes 15..23"));
    }

    /// Captured from 6.12.117 on x86_64 (`ft_rb2 s8 a; s16 b; s64 c; char d; int e; unsigned
    /// short f; struct foo x 3; __data_loc u8[] v; __rel_loc int[] r`).
    const REAL_RB2: &str = "name: ft_rb2\nID: 311\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:s8 a;\toffset:8;\tsize:1;\tsigned:1;\n\
        \tfield:s16 b;\toffset:9;\tsize:2;\tsigned:1;\n\
        \tfield:s64 c;\toffset:11;\tsize:8;\tsigned:1;\n\
        \tfield:char d;\toffset:19;\tsize:1;\tsigned:1;\n\
        \tfield:int e;\toffset:20;\tsize:4;\tsigned:1;\n\
        \tfield:unsigned short f;\toffset:24;\tsize:2;\tsigned:0;\n\
        \tfield:struct foo x;\toffset:26;\tsize:3;\tsigned:1;\n\
        \tfield:__data_loc u8[] v;\toffset:29;\tsize:4;\tsigned:1;\n\
        \tfield:__rel_loc int r[];\toffset:33;\tsize:4;\tsigned:1;\n\n\
        print fmt: \"a=%d b=%d c=%lld d=%d e=%d f=%u x=%llu v=%llu r=%llu\", REC->a, REC->b, REC->c, REC->d, \
        REC->e, REC->f, REC->x, REC->v, REC->r\n";

    #[test]
    fn a_real_format_decodes_signed_struct_and_dynamic_bytes() {
        let f = Format::parse(REAL_RB2).unwrap();
        assert_eq!((f.name.as_str(), f.id, f.fields.len()), ("ft_rb2", 311, 13));
        let kinds: Vec<Kind> = f.fields[4..].iter().map(|x| x.kind).collect();
        assert_eq!(kinds[..6], [Kind::Int; 6]);
        assert_eq!(
            kinds[6..],
            [
                Kind::Fixed { text: false },
                Kind::Loc { relative: false, text: false },
                Kind::Loc { relative: true, text: false }
            ]
        );
        // The record ftrace/raw-records-decode-signed-struct-and-dynamic-bytes writes.
        let mut r = vec![0x37, 0x01, 0x01, 0x00, 0x10, 0x27, 0, 0];
        r.extend_from_slice(&[0xff, 0xfe, 0xff]);
        r.extend_from_slice(&(-3i64).to_ne_bytes());
        r.push(0xfc);
        r.extend_from_slice(&(-5i32).to_ne_bytes());
        r.extend_from_slice(&[0xff, 0xff, 1, 2, 3]);
        r.extend_from_slice(&((3u32 << 16) | 37).to_ne_bytes());
        r.extend_from_slice(&((4u32 << 16) | 3).to_ne_bytes());
        r.extend_from_slice(&[0xa, 0xb, 0xc, 1, 0, 0, 0]);
        assert_eq!(
            show(&f, &f.decode(&r).unwrap()),
            "common_type=311 common_flags=1 common_preempt_count=0 common_pid=10000 a=-1 b=-2 c=-3 d=-4 e=-5 \
             f=65535 x={ bytes: 010203 } v={ bytes: 0a0b0c } r={ bytes: 01000000 }"
        );
        // The bracket text of the uninitialised length (catalogue G3) does not matter.
        let garbage = REAL_RB2.replace("int r[]", "int r[-2093481424]");
        assert_eq!(Format::parse(&garbage).unwrap(), f);
    }

    fn rec(pairs: &[(&str, FieldValue)]) -> Record {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[test]
    fn comparison_names_record_field_expected_and_actual() {
        use FieldValue::{Bytes, Signed, Text, Unsigned};
        let f = Format::parse(FORMAT).unwrap();
        let got = vec![f.decode(&record()).unwrap()];
        let good = rec(&[
            ("common_pid", Text("self".into())),
            ("a", Unsigned(254)),
            ("b", Unsigned(0xbeef)),
            ("c", Unsigned(0xdead_beef)),
            ("d", Unsigned(u64::MAX)),
            ("e", Signed(-5)),
            ("s", Text("ab".into())),
            ("dl", Text("hi".into())),
            ("rl", Bytes { bytes: "796f00".into() }),
            ("x", Bytes { bytes: "01 02 03".into() }),
            ("v", Bytes { bytes: "0a0b".into() }),
        ]);
        assert_eq!(compare(&f, &got, std::slice::from_ref(&good), 77), Vec::<String>::new());
        assert_eq!(
            compare(&f, &got, std::slice::from_ref(&good), 78),
            ["record 1: field common_pid: expected 78 (self), got 77"]
        );
        let mut bad = good.clone();
        bad.insert("e".into(), Unsigned(5));
        bad.insert("s".into(), Text("abc".into()));
        bad.insert("x".into(), Text("abc".into()));
        bad.insert("nope".into(), Unsigned(1));
        bad.remove("a");
        assert_eq!(
            compare(&f, &got, &[bad], 77),
            [
                "record 1: ft_rb has no field `nope`",
                "record 1: field a not given (it is 254)",
                "record 1: field e: expected 5, got -5",
                "record 1: field s: expected \"abc\", got \"ab\" (bytes 616200000000)",
                "record 1: field x: expected \"abc\", but it is a bytes field (expect `{ bytes: HEX }`): { bytes: 010203 }",
            ]
        );
        assert_eq!(
            compare(&f, &got, &[], 77),
            ["1 record(s) of ft_rb, expected 0", &format!("record 1 (not expected): {}", show(&f, &got[0])),]
        );
        assert_eq!(
            compare(&f, &got, &[good.clone(), good], 77),
            ["1 record(s) of ft_rb, expected 2", "record 2: missing"]
        );
    }
}
