//! The files steps: writes and reads of tracefs, sysctl and ordinary files, `stat`, directories.

use serde::{Deserialize, Serialize};

use crate::expect::Expect;

/// Writes bytes to a file in one write(2). Without `create` the file must exist and is
/// neither created nor truncated (tracefs control files, sysctls: O_TRUNC clears `trace`
/// or every dynamic event); with it, an ordinary file is created or replaced. `append`
/// opens with O_APPEND (the `>>` that `dynamic_events` wants). The bytes are `data` (text, sent
/// as its UTF-8) or `bytes` (raw, for a NUL or bytes that are not UTF-8), one of them.
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteFile {
    pub path: String,
    #[serde(default)]
    pub data: String,
    /// The bytes to write instead of `data`, each a number (`[0x75, 0x3a, 0x00]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Vec<u8>>,
    #[serde(default)]
    pub create: bool,
    #[serde(default)]
    pub append: bool,
    #[serde(default)]
    pub expect: Expect,
    /// While the result differs from `expect`, write again every millisecond, up to this
    /// long (for a state the kernel reaches asynchronously, such as a `-:` delete that is
    /// `EBUSY` until an RCU-deferred put has run). Only the attempt that counts is said,
    /// with the number of retries.
    #[serde(default)]
    pub within_ms: u64,
}

impl WriteFile {
    /// The bytes the step writes: `bytes` when given, else `data`'s.
    pub fn payload(&self) -> &[u8] {
        self.bytes.as_deref().unwrap_or(self.data.as_bytes())
    }
}

/// Reads a whole file and compares it: exactly (`equals`), lines it must hold (`contains`)
/// and must not hold (`lacks`), each compared as a whole line (`{any}` in one stands for
/// any text: a timestamp, a pid), and text it must and must not include anywhere
/// (`includes`, `excludes`).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadFile {
    pub path: String,
    #[serde(default)]
    pub equals: Option<String>,
    #[serde(default)]
    pub contains: Vec<String>,
    #[serde(default)]
    pub lacks: Vec<String>,
    /// Text that must occur somewhere (in any line, or across lines).
    #[serde(default)]
    pub includes: Vec<String>,
    /// Text that must not occur anywhere.
    #[serde(default)]
    pub excludes: Vec<String>,
    /// The file's first bytes, in hex (`"01000000"`), for binary files.
    #[serde(default)]
    pub head_hex: Option<String>,
    #[serde(default)]
    pub expect: Expect,
    /// Retry every millisecond until the expectation and every check hold, up to this long
    /// (for effects the kernel applies asynchronously, such as auto-delete).
    #[serde(default)]
    pub within_ms: u64,
    /// Keeps the content read (once every check holds) under this name, for a later
    /// `equals_kept` of the same scenario (an event's `id` before the event is deleted), and
    /// for `{kept:NAME}` in the text of any later step of the scenario, which stands for it
    /// without its trailing newline.
    #[serde(default)]
    pub keep_as: Option<String>,
    /// With `keep_as`: keeps, instead of the whole content, the text that stands for `{value}`
    /// in the first line this template matches (`user_events_multi:mf_ev.{value}`: the id of a
    /// multi-format event's tracepoint, from `available_events`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_match: Option<String>,
    /// The content must be exactly the one kept under this name (as `equals`).
    #[serde(default)]
    pub equals_kept: Option<String>,
}

/// stat(2) of a path (links followed), checking what is given: `mode`, the permission
/// bits in octal as text (`"0640"`), and the owner's `uid` and `gid`. `expect` judges the
/// stat call itself (`ENOENT` for a path that must not exist).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stat {
    pub path: String,
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub uid: Option<u32>,
    #[serde(default)]
    pub gid: Option<u32>,
    #[serde(default)]
    pub expect: Expect,
}

/// Makes a directory (a tracing instance under `/sys/kernel/tracing/instances/`).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mkdir {
    pub path: String,
    #[serde(default)]
    pub expect: Expect,
}

/// Removes a directory (a tracing instance; `EBUSY` while one of its events is in use).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rmdir {
    pub path: String,
    #[serde(default)]
    pub expect: Expect,
}

/// A `stat` step's `mode`: permission bits as 3 or 4 octal digits (`"640"`, `"0640"`), or
/// `None` for any other text. The host checks suites with it, the agent reads the value.
pub fn octal_mode(text: &str) -> Option<u32> {
    let digits = (3..=4).contains(&text.len()) && text.bytes().all(|b| (b'0'..=b'7').contains(&b));
    digits.then(|| u32::from_str_radix(text, 8).expect("octal digits"))
}

/// The text that stands, in a `keep_match` template, for the part of the line to keep.
pub const VALUE: &str = "{value}";
/// How a step's text names a kept content: `{kept:NAME}`.
pub const KEPT: &str = "{kept:";

/// The part of `line` that stands for `{value}` in `template`, when the line matches it (the
/// text around `{value}` is the same).
pub fn match_template<'l>(template: &str, line: &'l str) -> Option<&'l str> {
    let (before, after) = template.split_once(VALUE)?;
    let rest = line.strip_prefix(before)?;
    rest.strip_suffix(after)
}

/// The names `{kept:NAME}` refers to in `text`, in order.
pub fn kept_names(text: &str) -> Vec<&str> {
    text.split(KEPT).skip(1).filter_map(|rest| rest.split_once('}').map(|(name, _)| name)).collect()
}

/// `text` with each `{kept:NAME}` replaced by what `kept` gives for NAME; the first name it
/// does not know is the error.
pub fn with_kept(text: &str, kept: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(KEPT) {
        out.push_str(&rest[..at]);
        let after = &rest[at + KEPT.len()..];
        let Some((name, tail)) = after.split_once('}') else { break };
        out.push_str(&kept(name).ok_or_else(|| name.to_string())?);
        rest = tail;
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_keeps_the_text_in_place_of_value() {
        let t = "user_events_multi:mf.{value}";
        assert_eq!(match_template(t, "user_events_multi:mf.42"), Some("42"));
        assert_eq!(match_template(t, "user_events:mf"), None);
        assert_eq!(match_template("a{value}b", "a12b"), Some("12"));
        assert_eq!(match_template("a{value}b", "a12c"), None);
        assert_eq!(match_template("no value", "no value"), None);
    }

    #[test]
    fn kept_names_are_replaced_or_named() {
        assert_eq!(kept_names("x/{kept:id}/y{kept:b}"), ["id", "b"]);
        let kept = |n: &str| (n == "id").then(|| "7".to_string());
        assert_eq!(with_kept("mf.{kept:id}/enable", &kept), Ok("mf.7/enable".into()));
        assert_eq!(with_kept("plain", &kept), Ok("plain".into()));
        assert_eq!(with_kept("{kept:nope}", &kept), Err("nope".into()));
    }
}
