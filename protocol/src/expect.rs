//! What a call must return (`expect:` in a step): `ok`, an errno name, an exact return value, or
//! several of those joined by `or`, any of which will do (for calls racing others). Typed where
//! it is read, from YAML or from the JSON plan, so a bad value is refused there with its
//! position; the errno table both sides name errnos from lives here too.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// What a call must return: `ok` (success, the default), an errno name (`EINVAL`: the call
/// fails with that errno), an exact non-negative return value (`0`, `28`), or several of those
/// joined by `or` (`16 or EBADF`: any of them, for a call that races another and whose
/// documented results are several). It reads and writes as that text (YAML may give a number
/// unquoted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Expect {
    /// Success, whatever the call returns.
    #[default]
    Ok,
    /// Failure with this errno.
    Errno(i32),
    /// Success returning exactly this value.
    Value(i64),
    /// Any of these (single ones, at least two, none twice).
    AnyOf(Vec<Expect>),
}

impl Expect {
    /// Whether a call's result (`Ok(return value)` or `Err(errno)`) meets the expectation.
    pub fn met_by(&self, result: Result<i64, i32>) -> bool {
        match (self, result) {
            (Expect::AnyOf(any), _) => any.iter().any(|e| e.met_by(result)),
            (Expect::Ok, Ok(_)) => true,
            (Expect::Value(want), Ok(got)) => *want == got,
            (Expect::Errno(want), Err(got)) => *want == got,
            _ => false,
        }
    }

    /// One of `ok`, a number or an errno name.
    fn single(text: &str) -> Result<Expect, String> {
        if text == "ok" {
            return Ok(Expect::Ok);
        }
        if let Ok(v) = text.parse::<i64>() {
            return if v >= 0 {
                Ok(Expect::Value(v))
            } else {
                Err(format!("`{text}`: a failing call is stated by its errno name, not {v}"))
            };
        }
        errno_number(text).map(Expect::Errno).ok_or_else(|| {
            let hint = closest_errno(text).map_or(String::new(), |n| format!("; did you mean `{n}`?"));
            format!("`{text}` is not `ok`, a number or an errno name{hint}")
        })
    }
}

/// `ok`, `28` or `EINVAL`, or several joined by ` or ` (`16 or EBADF`; surrounding blanks
/// ignored); the error says what is wrong and, for a misspelt errno name, which one was
/// probably meant.
impl FromStr for Expect {
    type Err = String;

    fn from_str(text: &str) -> Result<Expect, String> {
        let text = text.trim();
        let words: Vec<&str> = text.split_whitespace().collect();
        if words.len() <= 1 {
            return Expect::single(text);
        }
        // `A or B or C`: the words at odd positions are all `or`, and there is one more item.
        let mut items = Vec::new();
        for (i, word) in words.iter().enumerate() {
            if i % 2 == 1 {
                if *word != "or" {
                    return Err(format!("`{text}`: several expectations are joined by `or`, not `{word}`"));
                }
                continue;
            }
            let item = Expect::single(word)?;
            if items.contains(&item) {
                return Err(format!("`{text}`: `{word}` is named twice"));
            }
            items.push(item);
        }
        if words.len().is_multiple_of(2) {
            return Err(format!("`{text}`: `or` needs an expectation after it"));
        }
        Ok(Expect::AnyOf(items))
    }
}

/// The text it reads from: `ok`, the errno's name (`errno N` for a number without one), the
/// value, or those joined by ` or `.
impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::AnyOf(any) => {
                for (i, e) in any.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" or ")?;
                    }
                    write!(f, "{e}")?;
                }
                Ok(())
            }
            Expect::Ok => f.write_str("ok"),
            Expect::Errno(n) => match errno_name(*n) {
                Some(name) => f.write_str(name),
                None => write!(f, "errno {n}"),
            },
            Expect::Value(v) => write!(f, "{v}"),
        }
    }
}

impl Serialize for Expect {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Asks for a string, as a `String` field would, so a YAML scalar comes as it was written
/// (`0x10` is refused, not read as 16); a deserializer that hands over a number anyway has it
/// read as its decimal text.
impl<'de> Deserialize<'de> for Expect {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Expect, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = Expect;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("`ok`, an errno name or a non-negative number, or several joined by `or`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Expect, E> {
                v.parse().map_err(|e| E::custom(format!("bad expect: {e}")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Expect, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Expect, E> {
                self.visit_str(&v.to_string())
            }
        }
        d.deserialize_str(Text)
    }
}

/// Editors offer `ok` and the errno names, and accept a number (YAML reads `0` as one).
#[cfg(feature = "schemars")]
impl schemars::JsonSchema for Expect {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Expect".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = std::iter::once("ok").chain(ERRNOS.iter().map(|(n, _)| *n)).collect();
        schemars::json_schema!({
            "description": "`ok` (the default), an errno name, an exact non-negative return value, or several joined by ` or ` (`16 or EBADF`: any will do)",
            "anyOf": [
                { "enum": names },
                { "type": "integer", "minimum": 0 },
                { "type": "string", "pattern": "^[0-9]+$" },
                { "type": "string", "pattern": "^\\s*(ok|[0-9]+|E[A-Z0-9]+)(\\s+or\\s+(ok|[0-9]+|E[A-Z0-9]+))+\\s*$" }
            ]
        })
    }
}

/// errno names and numbers; x86_64 and arm64 share the asm-generic numbering for all of them.
pub const ERRNOS: &[(&str, i32)] = &[
    ("EPERM", 1),
    ("ENOENT", 2),
    ("ESRCH", 3),
    ("EINTR", 4),
    ("EIO", 5),
    ("ENXIO", 6),
    ("E2BIG", 7),
    ("ENOEXEC", 8),
    ("EBADF", 9),
    ("ECHILD", 10),
    ("EAGAIN", 11),
    ("ENOMEM", 12),
    ("EACCES", 13),
    ("EFAULT", 14),
    ("EBUSY", 16),
    ("EEXIST", 17),
    ("EXDEV", 18),
    ("ENODEV", 19),
    ("ENOTDIR", 20),
    ("EISDIR", 21),
    ("EINVAL", 22),
    ("ENFILE", 23),
    ("EMFILE", 24),
    ("ENOTTY", 25),
    ("EFBIG", 27),
    ("ENOSPC", 28),
    ("ESPIPE", 29),
    ("EROFS", 30),
    ("EMLINK", 31),
    ("EPIPE", 32),
    ("EDOM", 33),
    ("ERANGE", 34),
    ("ENAMETOOLONG", 36),
    ("ENOSYS", 38),
    ("ENOTEMPTY", 39),
    ("EOVERFLOW", 75),
    ("EILSEQ", 84),
    ("EOPNOTSUPP", 95),
    ("EADDRINUSE", 98),
];

pub fn errno_number(name: &str) -> Option<i32> {
    ERRNOS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

pub fn errno_name(number: i32) -> Option<&'static str> {
    ERRNOS.iter().find(|(_, v)| *v == number).map(|(n, _)| *n)
}

/// The errno name a misspelling is closest to (at most two edits away).
pub fn closest_errno(word: &str) -> Option<&'static str> {
    if !word.starts_with('E') {
        return None;
    }
    ERRNOS.iter().map(|(n, _)| (edit_distance(word, n), *n)).filter(|(d, _)| *d <= 2).min().map(|(_, n)| n)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != *cb)).min(row[j] + 1).min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Expect, String> {
        text.parse()
    }

    #[test]
    fn expectations_parse_and_match() {
        assert!(Expect::default().met_by(Ok(3)));
        assert!(!Expect::default().met_by(Err(22)));
        assert_eq!(parse("EINVAL"), Ok(Expect::Errno(22)));
        assert!(Expect::Errno(22).met_by(Err(22)));
        assert!(!Expect::Errno(22).met_by(Err(7)));
        assert!(!Expect::Errno(22).met_by(Ok(0)));
        assert_eq!(parse(" 28 "), Ok(Expect::Value(28)));
        assert!(Expect::Value(28).met_by(Ok(28)));
        assert!(!Expect::Value(28).met_by(Ok(27)));
        assert_eq!(parse("ok"), Ok(Expect::Ok));
        assert_eq!(parse("-1").unwrap_err(), "`-1`: a failing call is stated by its errno name, not -1");
        assert_eq!(parse("EWHAT").unwrap_err(), "`EWHAT` is not `ok`, a number or an errno name");
        assert_eq!(
            parse("EINVLA").unwrap_err(),
            "`EINVLA` is not `ok`, a number or an errno name; did you mean `EINVAL`?"
        );
        assert_eq!(parse("0x10").unwrap_err(), "`0x10` is not `ok`, a number or an errno name");
        assert_eq!(errno_name(98), Some("EADDRINUSE"));
    }

    #[test]
    fn expectations_read_and_write_as_their_text() {
        for (text, want) in [("ok", Expect::Ok), ("EBUSY", Expect::Errno(16)), ("0", Expect::Value(0))] {
            let json = format!("\"{text}\"");
            assert_eq!(serde_json::from_str::<Expect>(&json).unwrap(), want);
            assert_eq!(serde_json::to_string(&want).unwrap(), json);
            assert_eq!(want.to_string(), text);
        }
        assert_eq!(Expect::Errno(4000).to_string(), "errno 4000");
        let bad = serde_json::from_str::<Expect>("\"EWHAT\"").unwrap_err().to_string();
        assert_eq!(bad, "bad expect: `EWHAT` is not `ok`, a number or an errno name at line 1 column 7");
        let bad = serde_json::from_str::<Expect>("\"-1\"").unwrap_err().to_string();
        assert!(bad.starts_with("bad expect: `-1`: a failing call"), "{bad}");
    }

    #[test]
    fn several_expectations_take_any() {
        let any = parse("16 or EBADF").unwrap();
        assert_eq!(any, Expect::AnyOf(vec![Expect::Value(16), Expect::Errno(9)]));
        assert!(any.met_by(Ok(16)) && any.met_by(Err(9)));
        assert!(!any.met_by(Ok(15)) && !any.met_by(Err(16)));
        assert_eq!(any.to_string(), "16 or EBADF");
        assert_eq!(serde_json::to_string(&any).unwrap(), r#""16 or EBADF""#);
        assert_eq!(
            serde_json::from_str::<Expect>(r#"" 0  or EBUSY or ENOENT ""#).unwrap().to_string(),
            "0 or EBUSY or ENOENT"
        );
        assert_eq!(parse("0 EBUSY").unwrap_err(), "`0 EBUSY`: several expectations are joined by `or`, not `EBUSY`");
        assert_eq!(
            parse("0 and EBUSY").unwrap_err(),
            "`0 and EBUSY`: several expectations are joined by `or`, not `and`"
        );
        assert_eq!(parse("0 or").unwrap_err(), "`0 or`: `or` needs an expectation after it");
        assert_eq!(parse("EBUSY or EBUSY").unwrap_err(), "`EBUSY or EBUSY`: `EBUSY` is named twice");
        assert_eq!(parse("0 or EWHAT").unwrap_err(), "`EWHAT` is not `ok`, a number or an errno name");
    }

    #[test]
    fn misspelt_errnos_find_their_name() {
        assert_eq!(closest_errno("EINVLA"), Some("EINVAL"));
        assert_eq!(closest_errno("ENOENTT"), Some("ENOENT"));
        assert_eq!(closest_errno("EXYZZYQ"), None, "too far from any");
        assert_eq!(closest_errno("inval"), None, "not an errno-like word");
    }
}
