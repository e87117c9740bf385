//! The lines the agent writes to `/dev/kmsg` around each scenario, so that the host's console
//! scanner can attribute a kernel report to the scenario that was running:
//! `ue-agent: begin INDEX NAME` before it starts, `ue-agent: end INDEX` after its result.

const BEGIN: &str = "ue-agent: begin ";
const END: &str = "ue-agent: end ";

/// One scenario marker on the kernel log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker<'a> {
    Begin { index: usize, name: &'a str },
    End { index: usize },
}

impl<'a> Marker<'a> {
    /// The kernel log message, without the printk prefix the console adds.
    pub fn line(&self) -> String {
        match self {
            Marker::Begin { index, name } => format!("{BEGIN}{index} {name}"),
            Marker::End { index } => format!("{END}{index}"),
        }
    }

    /// Whether a message starts as a marker does (well formed or not).
    pub fn is_marker(msg: &str) -> bool {
        msg.starts_with(BEGIN) || msg.starts_with(END)
    }

    /// A marker back from a message (its printk prefix removed); `None` for anything else,
    /// a malformed marker included (a begin without a name, an index that is not a number).
    pub fn parse(msg: &'a str) -> Option<Marker<'a>> {
        if let Some(rest) = msg.strip_prefix(BEGIN) {
            let (index, name) = rest.split_once(' ')?;
            let name = name.trim();
            return (!name.is_empty()).then_some(Marker::Begin { index: index.parse().ok()?, name });
        }
        let index = msg.strip_prefix(END)?.split(' ').next()?.parse().ok()?;
        Some(Marker::End { index })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip() {
        for m in [Marker::Begin { index: 3, name: "abi/reg-basic" }, Marker::End { index: 12 }] {
            assert_eq!(Marker::parse(&m.line()), Some(m));
            assert!(Marker::is_marker(&m.line()));
        }
        assert_eq!(Marker::Begin { index: 1, name: "a/b" }.line(), "ue-agent: begin 1 a/b");
        assert_eq!(Marker::End { index: 1 }.line(), "ue-agent: end 1");
        assert_eq!(Marker::parse("ue-agent: end 7 extra"), Some(Marker::End { index: 7 }));
        for malformed in ["ue-agent: begin 3", "ue-agent: begin x a/b", "ue-agent: begin 3  ", "ue-agent: end x"] {
            assert!(Marker::is_marker(malformed));
            assert_eq!(Marker::parse(malformed), None, "{malformed}");
        }
        assert!(!Marker::is_marker("ue-agent: plan x86_64: 3 scenarios"));
    }
}
