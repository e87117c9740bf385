//! The values a step writes or compares, and their bytes: the fields of a payload, in the
//! guest's native byte order.

use serde::{Deserialize, Serialize};

/// One field of a written payload. Integers are stored in the guest's byte order (encoded in
/// the guest, where native is the kernel's order); `text` is the raw bytes, `cstr` adds a NUL, `bytes` is hex, `zeros` is
/// that many zero bytes (a large payload), `loc` is a `__data_loc`/`__rel_loc` word (`size << 16 | offset`).
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Value {
    U8(u8),
    U16(u16),
    U32(u32),
    U64(u64),
    S8(i8),
    S16(i16),
    S32(i32),
    S64(i64),
    Text(String),
    Cstr(String),
    Bytes(String),
    Zeros(u32),
    Loc { offset: u16, size: u16 },
}

impl Value {
    /// The bytes this field contributes to a payload.
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        Ok(match self {
            Value::U8(v) => v.to_ne_bytes().to_vec(),
            Value::U16(v) => v.to_ne_bytes().to_vec(),
            Value::U32(v) => v.to_ne_bytes().to_vec(),
            Value::U64(v) => v.to_ne_bytes().to_vec(),
            Value::S8(v) => v.to_ne_bytes().to_vec(),
            Value::S16(v) => v.to_ne_bytes().to_vec(),
            Value::S32(v) => v.to_ne_bytes().to_vec(),
            Value::S64(v) => v.to_ne_bytes().to_vec(),
            Value::Text(t) => t.as_bytes().to_vec(),
            Value::Cstr(t) => t.bytes().chain(std::iter::once(0)).collect(),
            Value::Bytes(hex) => decode_hex(hex)?,
            Value::Zeros(n) => vec![0; *n as usize],
            Value::Loc { offset, size } => ((u32::from(*size) << 16) | u32::from(*offset)).to_ne_bytes().to_vec(),
        })
    }
}

/// Decodes hex digits, ignoring spaces (`"de ad be ef"`).
pub fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("`{text}`: an odd number of hex digits"));
    }
    digits
        .chunks(2)
        .map(|pair| {
            let s = std::str::from_utf8(pair).map_err(|_| format!("`{text}`: not hex"))?;
            u8::from_str_radix(s, 16).map_err(|_| format!("`{text}`: `{s}` is not hex"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_encode_little_endian() {
        assert_eq!(Value::U32(0x0102_0304).encode().unwrap(), 0x0102_0304u32.to_ne_bytes());
        assert_eq!(Value::S16(-2).encode().unwrap(), (-2i16).to_ne_bytes());
        assert_eq!(Value::Cstr("ab".into()).encode().unwrap(), [b'a', b'b', 0]);
        assert_eq!(Value::Zeros(3).encode().unwrap(), [0, 0, 0]);
        assert_eq!(Value::Loc { offset: 12, size: 3 }.encode().unwrap(), ((3u32 << 16) | 12).to_ne_bytes());
        assert_eq!(Value::Bytes("de ad".into()).encode().unwrap(), [0xde, 0xad]);
        assert!(Value::Bytes("abc".into()).encode().is_err());
    }
}
