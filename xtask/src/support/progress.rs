//! Progress output: a live spinner on a terminal, plain timestamped lines everywhere else.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// `HH:MM:SS` in local time, the prefix of every progress line (the KUnit convention).
pub fn clock() -> String {
    jiff::Zoned::now().strftime("%H:%M:%S").to_string()
}

/// Set to `1` in its environment by the harness of `cargo xtask test`'s checks, and so in the
/// processes it starts: every [`line`] is indented under the check's own verdict line, so the
/// planted failures of negative controls are not top-level lines.
pub const NESTED_ENV: &str = "XTASK_PROGRESS_NESTED";

fn indent() -> &'static str {
    indent_for(std::env::var_os(NESTED_ENV).as_deref())
}

fn indent_for(nested: Option<&std::ffi::OsStr>) -> &'static str {
    if nested.is_some_and(|v| v == "1") {
        "    "
    } else {
        ""
    }
}

/// Prints one timestamped progress line on stderr (indented when nested, see [`NESTED_ENV`]).
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
    fn nested_lines_are_indented() {
        assert_eq!(indent_for(Some("1".as_ref())), "    ");
        assert_eq!(indent_for(Some("0".as_ref())), "");
        assert_eq!(indent_for(None), "");
        assert_eq!(indent(), "", "{NESTED_ENV} is not set in the unit tests");
    }
}
