//! The lines of the tracefs files the hygiene reads, taken apart (sans-IO): `user_events_status`,
//! a `trigger` line and how it is removed, a `dynamic_events` line and how it is removed, a
//! CPU's `stats`, a `set_event` entry as a message names it.

/// `user_events_status` parsed: the event lines (name, and ` # Used by ...` when busy) and
/// the counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub events: Vec<String>,
    pub active: Option<u64>,
    pub busy: Option<u64>,
}

pub fn parse_status(text: &str) -> Status {
    let mut s = Status::default();
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("Active:") {
            s.active = n.trim().parse().ok();
        } else if let Some(n) = line.strip_prefix("Busy:") {
            s.busy = n.trim().parse().ok();
        } else if !line.trim().is_empty() {
            s.events.push(line.to_string());
        }
    }
    s
}

/// How one trigger line (as `trigger` shows it) is removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TriggerRemoval {
    /// Written to the `trigger` file: `!traceon`, `!enable_event:user_events:foo`.
    Write(String),
    /// Opening `trigger` with O_TRUNC: removes every hist trigger of the event, unless another
    /// event's trigger uses its variables (then the next round does).
    Truncate,
}

/// The removal of a trigger line, None for comments and blank lines. The count
/// (`:unlimited`, `:count=3`), the filter (` if ...`) and the state (` [active]`) are not
/// part of what names a trigger.
pub fn trigger_removal(line: &str) -> Option<TriggerRemoval> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let head = line.split_whitespace().next()?;
    let parts: Vec<&str> = head.split(':').collect();
    match parts[0] {
        "hist" => Some(TriggerRemoval::Truncate),
        "enable_event" | "disable_event" | "enable_hist" | "disable_hist" if parts.len() >= 3 => {
            Some(TriggerRemoval::Write(format!("!{}", parts[..3].join(":"))))
        }
        command => Some(TriggerRemoval::Write(format!("!{command}"))),
    }
}

/// A trigger line as a message shows it: without its ` [active]` state.
pub fn trigger_text(line: &str) -> &str {
    let line = line.trim();
    line.strip_suffix(" [active]").or_else(|| line.strip_suffix(" [paused]")).unwrap_or(line)
}

/// How one `dynamic_events` line is removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DynamicRemoval {
    /// A user event (`u:NAME ...`): DIAG_IOCSDEL by name, which tells busy from gone.
    User(String),
    /// Any other (`e:eprobes/x ...`, `s:synthetic/y ...`, `p:kprobes/z ...`): this command
    /// appended to `dynamic_events`.
    Command(String),
}

pub fn dynamic_removal(line: &str) -> Option<DynamicRemoval> {
    // A user event's name is all up to the first space (`user_event_show()` writes one before
    // the fields), a tab included: `u:a\tb u32 x` is the event `a\tb`.
    if let Some(rest) = line.strip_prefix("u:") {
        let name = rest.split(' ').next().unwrap_or(rest).trim_end_matches('\n');
        return (!name.is_empty()).then(|| DynamicRemoval::User(name.to_string()));
    }
    let head = line.split_whitespace().next()?;
    let (_, event) = head.split_once(':')?;
    Some(DynamicRemoval::Command(format!("-:{event}")))
}

/// The `entries:` figure of a `per_cpu/cpuN/stats` file: records not yet consumed.
pub fn stats_entries(text: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix("entries:")).and_then(|n| n.trim().parse().ok())
}

/// `user_events:foo` (a `set_event` line) as `user event foo`, others as `event sys:name`.
pub fn event_label(entry: &str) -> String {
    match entry.split_once(':') {
        Some(("user_events", name)) => format!("user event {name}"),
        Some(("user_events_multi", name)) => format!("user event {name} (multi-format)"),
        _ => format!("event {entry}"),
    }
}
