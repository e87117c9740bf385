//! `/proc/kallsyms` read as a map of the kernel's text: the function an address lies in (a
//! perf sample's instruction pointer), and the address range of a function (where failslab's
//! stack filter aims).

/// The text symbols of `/proc/kallsyms` (kinds `t` and `T`), as address and name.
fn text_symbols(kallsyms: &str) -> impl Iterator<Item = (u64, &str)> {
    kallsyms.lines().filter_map(|line| {
        let mut parts = line.split_whitespace();
        let (addr, kind, name) = (parts.next()?, parts.next()?, parts.next()?);
        matches!(kind, "t" | "T").then_some(())?;
        Some((u64::from_str_radix(addr, 16).ok()?, name))
    })
}

/// The function a symbol names: without a compiler's suffix (`.isra.0`, `.constprop.0`, ...).
pub fn function_of(symbol: &str) -> &str {
    symbol.split('.').next().unwrap_or(symbol)
}

/// The text symbol of `/proc/kallsyms` (its `text`) that `ip` lies in: the one with the
/// highest address at or below it, with the distance; None below every text symbol.
pub fn text_symbol(kallsyms: &str, ip: u64) -> Option<(&str, u64)> {
    // The first of symbols at one address wins, as in the file's order.
    let (at, name) =
        text_symbols(kallsyms).filter(|(addr, _)| *addr <= ip).reduce(|best, s| if s.0 > best.0 { s } else { best })?;
    Some((name, ip - at))
}

/// The address range of text symbol `name` (`[start, end)`, the end being the next text
/// symbol's address), or of its compiler-made copy (`name.isra.0` and the like) when `name`
/// itself is not there; None when there is neither (the function was inlined everywhere).
pub fn function_range(kallsyms: &str, name: &str) -> Option<(u64, u64)> {
    let exact = text_symbols(kallsyms).find(|(_, s)| *s == name);
    let copy = || text_symbols(kallsyms).find(|(_, s)| function_of(s) == name);
    let (start, _) = exact.or_else(copy)?;
    let end = text_symbols(kallsyms).map(|(a, _)| a).filter(|a| *a > start).min()?;
    Some((start, end))
}

/// `/proc/kallsyms`, with the addresses shown (they read as 0 without CAP_SYSLOG).
pub fn read() -> Result<String, String> {
    let text = std::fs::read_to_string("/proc/kallsyms")
        .map_err(|e| format!("/proc/kallsyms: {}", crate::runtime::sys::error_name(&e)))?;
    // Per-CPU symbols may sit at 0 (x86_64's first lines); hidden addresses are all 0.
    if !text.lines().any(|l| l.split_whitespace().next().is_some_and(|a| a.bytes().any(|b| b != b'0'))) {
        return Err("/proc/kallsyms shows no addresses (needs CAP_SYSLOG)".into());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ip_is_named_by_the_text_symbol_at_or_below_it() {
        let kallsyms = "ffffffff81000000 T _stext\nffffffff81000100 t user_events_write_core.isra.0\n\
                        ffffffff81000080 D some_data\nffffffff81000200 T user_events_write\n";
        assert_eq!(text_symbol(kallsyms, 0xffffffff81000150), Some(("user_events_write_core.isra.0", 0x50)));
        assert_eq!(text_symbol(kallsyms, 0xffffffff810000f0), Some(("_stext", 0xf0)));
        assert_eq!(text_symbol(kallsyms, 0xffffffff81000200), Some(("user_events_write", 0)));
        assert_eq!(text_symbol(kallsyms, 0), None);
    }

    #[test]
    fn a_function_spans_up_to_the_next_text_symbol() {
        let kallsyms = "ffffffff81000300 T after\nffffffff81000100 t user_events_open\n\
                        ffffffff81000180 d data\nffffffff81000200 t copy.isra.0\n";
        assert_eq!(function_range(kallsyms, "user_events_open"), Some((0xffffffff81000100, 0xffffffff81000200)));
        assert_eq!(function_range(kallsyms, "copy"), Some((0xffffffff81000200, 0xffffffff81000300)));
        assert_eq!(function_range(kallsyms, "after"), None, "no symbol after the last: no end");
        assert_eq!(function_range(kallsyms, "inlined"), None);
    }
}
