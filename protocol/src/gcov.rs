//! Coverage data on the result channel: which kernel source files the agent collects GCOV
//! counters for (`GcovPlan`, part of the plan), and the `# ue-gcov` frames that carry each
//! scenario's `.gcda` snapshot back to the host, lz4-compressed and in base64 chunks
//! (`GcovFrame`).

use serde::{Deserialize, Serialize};

/// Where debugfs shows the kernel's GCOV data (`kernel/gcov/fs.c`): one `.gcda` per profiled
/// object under its build directory's absolute path, and `reset`, which zeroes every counter.
pub const GCOV_ROOT: &str = "/sys/kernel/debug/gcov";

/// Base64 characters per `# ue-gcov` frame: short enough for any line reader.
pub const FRAME_CHARS: usize = 3072;

/// What the agent collects around each scenario on a coverage kernel.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GcovPlan {
    /// Source files relative to the kernel tree (`kernel/trace/trace_events_user.c`): the
    /// agent reads the `.gcda` whose path under [`GCOV_ROOT`] ends in the same name, `.gcda`
    /// for `.c`.
    pub files: Vec<String>,
}

/// The path suffix of a source file's `.gcda` under [`GCOV_ROOT`].
pub fn gcda_suffix(source: &str) -> String {
    format!("/{}.gcda", source.strip_suffix(".c").unwrap_or(source))
}

/// `# ue-gcov INDEX FILE PART/PARTS DATA`: part `PART` (from 1) of `PARTS` of the base64 of the
/// lz4 block (its size prepended, `lz4_flex`'s `compress_prepend_size`) of scenario `INDEX`'s
/// `.gcda` of source `FILE` ([`BOOT_INDEX`]: the boot's). `PARTS` 0 (and no data) says that file had no
/// data to read; the reason follows as `DATA`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcovFrame {
    pub index: usize,
    pub file: String,
    pub part: usize,
    pub parts: usize,
    pub data: String,
}

pub const GCOV_PREFIX: &str = "# ue-gcov ";

/// The `INDEX` of the boot's snapshot: the counters as the boot left them, read before the
/// first scenario's reset (the user_events init, the group and its system names), so code only
/// the boot runs is counted too.
pub const BOOT_INDEX: usize = 0;

/// The name the host gives the boot's snapshot in place of a scenario's (`suite/name`: it has
/// no `/`, so no scenario can have it).
pub const BOOT_NAME: &str = "boot";

impl GcovFrame {
    /// The frames of one snapshot, in order.
    pub fn split(index: usize, file: &str, gcda: &[u8]) -> Vec<GcovFrame> {
        // After the reset before each scenario most counters are zero: 12 KB of them become
        // about 3 KB, a quarter of the time on an emulated result port.
        let text = base64_encode(&lz4_flex::compress_prepend_size(gcda));
        let chunks: Vec<&str> = if text.is_empty() {
            vec![""]
        } else {
            text.as_bytes().chunks(FRAME_CHARS).map(|c| std::str::from_utf8(c).unwrap_or("")).collect()
        };
        let parts = chunks.len();
        chunks
            .into_iter()
            .enumerate()
            .map(|(i, c)| GcovFrame { index, file: file.to_string(), part: i + 1, parts, data: c.to_string() })
            .collect()
    }

    /// The frame saying why a file has no snapshot.
    pub fn missing(index: usize, file: &str, why: &str) -> GcovFrame {
        let why = why.replace(['\n', '\r'], " ");
        GcovFrame { index, file: file.to_string(), part: 0, parts: 0, data: why }
    }

    pub fn format(&self) -> String {
        format!("{GCOV_PREFIX}{} {} {}/{} {}", self.index, self.file, self.part, self.parts, self.data)
    }

    pub fn parse(line: &str) -> Option<GcovFrame> {
        let rest = line.trim_end_matches(['\r', '\n']).strip_prefix(GCOV_PREFIX)?;
        let mut it = rest.splitn(4, ' ');
        let index = it.next()?.parse().ok()?;
        let file = it.next()?.to_string();
        let (part, parts) = it.next()?.split_once('/')?;
        let (part, parts) = (part.parse().ok()?, parts.parse().ok()?);
        let data = it.next().unwrap_or("").to_string();
        if file.is_empty() || (parts > 0 && (part == 0 || part > parts)) {
            return None;
        }
        Some(GcovFrame { index, file, part, parts, data })
    }
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> shift) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The bytes of standard base64; `None` for any other character or a bad length.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let text = text.as_bytes();
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let value = |c: u8| ALPHABET.iter().position(|&a| a == c).map(|p| p as u32);
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for (k, quad) in text.chunks(4).enumerate() {
        let last = k + 1 == text.len() / 4;
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for &c in &quad[..4 - pad] {
            n = (n << 6) | value(c)?;
        }
        n <<= 6 * pad as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

/// Joins the frames of one stream into each scenario's snapshots: `(index, file)` to the bytes,
/// or to why there are none (a frame missing, bad base64, or the agent's reason).
pub fn assemble(frames: &[GcovFrame]) -> std::collections::BTreeMap<(usize, String), Result<Vec<u8>, String>> {
    let mut parts: std::collections::BTreeMap<(usize, String), Vec<&GcovFrame>> = Default::default();
    for f in frames {
        parts.entry((f.index, f.file.clone())).or_default().push(f);
    }
    parts
        .into_iter()
        .map(|(key, fs)| {
            let value = if let Some(m) = fs.iter().find(|f| f.parts == 0) {
                Err(m.data.clone())
            } else {
                let parts = fs[0].parts;
                let mut text = String::new();
                let mut ok = fs.len() == parts;
                for (i, f) in fs.iter().enumerate() {
                    ok &= f.part == i + 1 && f.parts == parts;
                    text.push_str(&f.data);
                }
                if ok {
                    base64_decode(&text).ok_or_else(|| "bad base64".to_string()).and_then(|lz4| {
                        lz4_flex::decompress_size_prepended(&lz4).map_err(|e| format!("bad lz4 data: {e}"))
                    })
                } else {
                    Err(format!("{} of {parts} frame(s), not in order", fs.len()))
                }
            };
            (key, value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_every_length() {
        for n in 0..70usize {
            let bytes: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            let text = base64_encode(&bytes);
            assert_eq!(base64_decode(&text).unwrap(), bytes, "{n}");
        }
        assert_eq!(base64_encode(b"gcda"), "Z2NkYQ==");
        assert_eq!(base64_decode("Z2NkYQ").as_deref(), None, "bad length");
        assert_eq!(base64_decode("Z2=kYQ==").as_deref(), None, "padding inside");
        assert_eq!(base64_decode("Z2N!YQ==").as_deref(), None, "bad character");
    }

    #[test]
    fn frames_split_parse_and_assemble() {
        // Bytes lz4 cannot shrink much (a linear congruential sequence), so it takes frames.
        let gcda: Vec<u8> = (0..10_000u32)
            .scan(7u32, |x, _| Some((*x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345), *x >> 24).1 as u8))
            .collect();
        let frames = GcovFrame::split(3, "kernel/trace/trace_events_user.c", &gcda);
        assert!(frames.len() > 1);
        let parsed: Vec<GcovFrame> = frames.iter().map(|f| GcovFrame::parse(&f.format()).unwrap()).collect();
        assert_eq!(parsed, frames);
        let missing = GcovFrame::missing(4, "kernel/trace/trace_events.c", "no such file\n(ENOENT)");
        let back = GcovFrame::parse(&missing.format()).unwrap();
        assert_eq!(back.data, "no such file (ENOENT)");
        let mut all = parsed.clone();
        all.push(back);
        let joined = assemble(&all);
        assert_eq!(joined[&(3, "kernel/trace/trace_events_user.c".to_string())].as_ref().unwrap(), &gcda);
        assert!(joined[&(4, "kernel/trace/trace_events.c".to_string())].is_err());
        // A lost frame is named, not decoded into garbage.
        let cut: Vec<GcovFrame> = parsed.into_iter().skip(1).collect();
        let joined = assemble(&cut);
        assert!(joined.values().next().unwrap().as_ref().unwrap_err().contains("frame(s)"));
        assert_eq!(gcda_suffix("kernel/trace/trace_events_user.c"), "/kernel/trace/trace_events_user.gcda");
        assert_eq!(GcovFrame::parse("# ue-gcov 1 f 3/2 AA"), None);
    }
}
