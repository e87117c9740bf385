//! Progress output: a live spinner on a terminal, plain timestamped lines everywhere else.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// `HH:MM:SS` in local time, the prefix of every progress line (the KUnit convention).
pub fn clock() -> String {
    jiff::Zoned::now().strftime("%H:%M:%S").to_string()
}

/// Set while a check of `cargo xtask test` runs: its inner progress (the planted failures of
/// negative controls among it) is indented under the check's own verdict line.
static NESTED: AtomicBool = AtomicBool::new(false);

/// The environment variable that nests a child process's progress the same way.
pub const NESTED_ENV: &str = "XTASK_PROGRESS_NESTED";

/// Indents every later [`line`] of this process (and, through [`NESTED_ENV`], of the children
/// it starts after this) until called with `false`.
pub fn set_nested(on: bool) {
    NESTED.store(on, Ordering::Relaxed);
}

fn indent() -> &'static str {
    let nested = NESTED.load(Ordering::Relaxed) || std::env::var_os(NESTED_ENV).is_some_and(|v| v == "1");
    if nested {
        "    "
    } else {
        ""
    }
}

/// Prints one timestamped progress line on stderr (indented when nested, see [`set_nested`]).
pub fn line(msg: impl AsRef<str>) {
    eprintln!("{}[{}] {}", indent(), clock(), msg.as_ref());
}

/// Prints one timestamped line at the top level whatever the nesting: a check's verdict.
pub fn top_line(msg: impl AsRef<str>) {
    eprintln!("[{}] {}", clock(), msg.as_ref());
}

/// `[TAG]` for a progress line, coloured only when stderr is a terminal: green for a pass,
/// yellow for a skip or an expected failure, red for the rest.
pub fn tag(tag: &str) -> String {
    if !std::io::stderr().is_terminal() || std::env::var_os("NO_COLOR").is_some() {
        return format!("[{tag}]");
    }
    let colour = match tag {
        "PASSED" | "PASS" => "32",
        "SKIPPED" | "XFAIL" => "33",
        _ => "31",
    };
    format!("\x1b[{colour}m[{tag}]\x1b[0m")
}

/// A long-running step: a spinner with a live message on a terminal, otherwise a line every
/// `PLAIN_INTERVAL` so CI logs show the step is alive without drowning in make output.
pub struct Task {
    label: String,
    bar: Option<ProgressBar>,
    started: Instant,
    last_plain: Instant,
}

const PLAIN_INTERVAL: Duration = Duration::from_secs(20);

impl Task {
    pub fn start(label: impl Into<String>) -> Task {
        let label = label.into();
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("[{elapsed_precise}] {spinner} {prefix}: {wide_msg}")
                    .expect("static template"),
            );
            bar.set_prefix(label.clone());
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        if bar.is_none() {
            line(format!("{label}: started"));
        }
        let now = Instant::now();
        Task { label, bar, started: now, last_plain: now }
    }

    pub fn update(&mut self, msg: impl AsRef<str>) {
        match &self.bar {
            Some(bar) => bar.set_message(msg.as_ref().to_string()),
            None if self.last_plain.elapsed() >= PLAIN_INTERVAL => {
                self.last_plain = Instant::now();
                line(format!("{}: {}", self.label, msg.as_ref()));
            }
            None => {}
        }
    }

    /// Ends the task with a closing line that keeps the elapsed time.
    pub fn finish(self, msg: impl AsRef<str>) -> Duration {
        let elapsed = self.started.elapsed();
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        line(format!("{}: {} ({:.1} s)", self.label, msg.as_ref(), elapsed.as_secs_f64()));
        elapsed
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_indents_lines_until_reset() {
        set_nested(true);
        assert_eq!(indent(), "    ");
        set_nested(false);
        assert_eq!(indent(), "", "reset, and {NESTED_ENV} is not set in the unit tests");
    }
}
