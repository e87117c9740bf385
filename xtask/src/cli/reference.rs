//! The book's command-line reference (`docs/src/cli.md`): every command's `--help` text as clap
//! renders it from `cli/`, so the page says what the binary says; a test keeps it current.

use clap::{Command, CommandFactory};

use crate::cli::Xtask;

/// The page, relative to the checkout.
pub const PAGE: &str = "docs/src/cli.md";

/// The page's text: the top-level command's long help, then each subcommand's, depth first.
pub fn render() -> String {
    // Env values are the reader's environment, not the program's: `[env: XTASK_CACHE_DIR]`
    // without its value keeps the page the same on every host. A fixed width for the same reason.
    let mut top = hide_env_values(Xtask::command()).term_width(100);
    top.build();
    let mut out = String::from(
        "# Command-line reference\n\n\
         <!-- Generated from xtask/src/cli/; do not edit: `UPDATE_CLI=1 cargo test -p xtask\n     \
         cli_reference_is_current` rewrites it. -->\n\n\
         Every verb's `--help`, as `cargo xtask` prints it. The installed `ue-conformance` takes the\n\
         same verbs and flags. [Exit codes](exit-codes.md) has the exit codes in full.\n",
    );
    section(&mut top, &mut out);
    out
}

/// One command's heading and long help, then its subcommands' (clap's own `help` left out).
fn section(cmd: &mut Command, out: &mut String) {
    let name = cmd.get_bin_name().unwrap_or(cmd.get_name()).to_string();
    // clap indents the blank line between a flag's help and its `[env: ...]`: trailing blanks
    // that editors strip, so they are left out.
    let help: Vec<String> = cmd.render_long_help().to_string().lines().map(|l| l.trim_end().to_string()).collect();
    out.push_str(&format!("\n## `{name}`\n\n```text\n{}\n```\n", help.join("\n").trim_end()));
    for sub in cmd.get_subcommands_mut().filter(|s| s.get_name() != "help") {
        section(sub, out);
    }
}

/// `cmd` and its subcommands with every env value hidden.
fn hide_env_values(cmd: Command) -> Command {
    cmd.mut_args(|a| a.hide_env_values(true)).mut_subcommands(hide_env_values)
}

#[cfg(test)]
mod tests {
    /// `docs/src/cli.md` is the help the binary prints; `UPDATE_CLI=1 cargo test -p xtask
    /// cli_reference_is_current` rewrites it.
    #[test]
    fn cli_reference_is_current() {
        let want = super::render();
        crate::support::checkout::assert_generated_current(
            super::PAGE,
            &want,
            "UPDATE_CLI",
            "cli_reference_is_current",
        );
    }

    /// Every verb has its section, and no value of the environment leaks into the page.
    #[test]
    fn the_reference_has_every_verb_and_no_env_values() {
        let page = super::render();
        for verb in ["setup", "run", "test", "validate", "mutants", "check-suites"] {
            assert!(page.contains(&format!("\n## `cargo xtask {verb}`\n")), "no section for {verb}");
        }
        assert!(page.contains("[env: XTASK_CACHE_DIR]"), "{page}");
        assert!(!page.contains("[env: XTASK_CACHE_DIR="), "{page}");
    }
}
