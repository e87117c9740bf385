//! What a boot image's header says: the arch it was built for and its release string
//! (`--kernel-image` is checked against both).

/// The architecture a boot image was built for, from its header magic (`Arch::image_magic`).
pub fn arch(bytes: &[u8]) -> Option<&'static str> {
    crate::arch::ARCHES
        .iter()
        .find(|a| bytes.get(a.image_magic.0..a.image_magic.0 + a.image_magic.1.len()) == Some(a.image_magic.1))
        .map(|a| a.name)
}

/// The release string in a boot image: the x86 setup header's `kernel_version` pointer, or
/// the `Linux version` banner of an uncompressed arm64 Image.
pub fn release(bytes: &[u8]) -> Option<String> {
    let banner = if bytes.get(0x202..0x206) == Some(b"HdrS") {
        let ptr = u16::from_le_bytes([*bytes.get(0x20e)?, *bytes.get(0x20f)?]) as usize + 0x200;
        bytes.get(ptr..)?
    } else {
        // An uncompressed image's banner; a compressed one whose decompressor carries only the
        // format ("Linux version %s", s390's bzImage) has the release as its own string,
        // `RELEASE (user@host) #N ...` (arch/s390/boot/version.c), found by its " (" and ") #".
        let needle = b"Linux version ";
        let banner = bytes.windows(needle.len()).position(|w| w == needle).map(|at| &bytes[at + needle.len()..]);
        match banner {
            Some(b) if !b.starts_with(b"%") => b,
            _ => return compressed_release(bytes),
        }
    };
    let end = banner.iter().position(|&b| b == 0 || b == b' ')?;
    Some(String::from_utf8_lossy(&banner[..end]).into_owned())
}

/// `RELEASE (user@host) #N`: the release is the run of printable bytes before " (", when it
/// starts with a digit and the parenthesis holds an `@` and is followed by " #".
fn compressed_release(bytes: &[u8]) -> Option<String> {
    let mut from = 0;
    while let Some(at) = bytes.get(from..)?.windows(2).position(|w| w == b" (").map(|p| p + from) {
        from = at + 2;
        let after = &bytes[from..];
        let Some(close) = after.iter().take(256).position(|&b| b == b')') else { continue };
        if !after[..close].contains(&b'@') || !after[close..].starts_with(b") #") {
            continue;
        }
        let start = bytes[..at].iter().rposition(|&b| !(b.is_ascii_graphic())).map_or(0, |p| p + 1);
        let release = &bytes[start..at];
        // `strings` shows a stray printable byte glued to the release: start at its first digit.
        let digit = release.iter().position(u8::is_ascii_digit)?;
        return Some(String::from_utf8_lossy(&release[digit..]).into_owned());
    }
    None
}

#[cfg(test)]
pub mod tests {
    use super::*;

    pub fn x86_header(version: &str) -> Vec<u8> {
        let mut b = vec![0u8; 0x400];
        b[0x202..0x206].copy_from_slice(b"HdrS");
        b[0x20e..0x210].copy_from_slice(&(0x100u16).to_le_bytes());
        let s = format!("{version} (root@host) #1 SMP\0");
        b[0x300..0x300 + s.len()].copy_from_slice(s.as_bytes());
        b
    }

    #[test]
    fn image_headers_give_arch_and_release() {
        let x = x86_header("6.12.117");
        assert_eq!(arch(&x), Some("x86_64"));
        assert_eq!(release(&x).as_deref(), Some("6.12.117"));
        let mut a = vec![0u8; 0x100];
        a[0x38..0x3c].copy_from_slice(b"ARM\x64");
        a.extend_from_slice(b"xxLinux version 6.12.117-arm (gcc) #1\0");
        assert_eq!(arch(&a), Some("arm64"));
        assert_eq!(release(&a).as_deref(), Some("6.12.117-arm"));
        assert_eq!(arch(b"\x1f\x8b gzip"), None);
        let mut r = vec![0u8; 0x100];
        r[0x30..0x3c].copy_from_slice(b"RISCV\0\0\0RSC\x05");
        assert_eq!(arch(&r), Some("riscv64"));
        let mut s = vec![0u8; 0x10100];
        s[0x10008..0x1000e].copy_from_slice(b"S390EP");
        assert_eq!(arch(&s), Some("s390x"));
        // s390's compressed bzImage: the decompressor's format string, then kernel_version.
        s.extend_from_slice(
            b"\0Linux version %s\n\0 (no close\0x (y) #\0L6.12.117 (root@vm) #1 SMP Mon Nov 23 23:52:05 UTC 2026\0",
        );
        assert_eq!(release(&s).as_deref(), Some("6.12.117"));
    }
}
