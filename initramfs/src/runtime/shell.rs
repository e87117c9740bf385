//! A small interactive shell on the console for poking at a booted kernel by hand: ls, cat,
//! echo with redirection (one write(2), as tracefs wants), cd, pwd, run, help, exit.

use std::fs::{self, OpenOptions};
use std::io::{BufRead, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;

use crate::runtime::sys;

const HELP: &str = "\
commands:
  ls [PATH]                 list a directory
  cat PATH...               print files
  echo [-n] TEXT... [> FILE | >> FILE]
                            print, or write to FILE in one write(2) (> truncates, >> appends)
  cd [PATH]                 change directory (default /)
  pwd                       print the current directory
  run PATH [ARGS...]        run a program on the console and print its exit status
  help                      this text
  exit                      leave the shell; the agent then reboots, which ends the VM
quotes: '...' is literal, \"...\" allows \\\" and \\\\; a backslash escapes the next character
";

/// A word or a redirection operator, as the tokenizer sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    Word(String),
    /// `>`
    Out,
    /// `>>`
    Append,
}

/// Splits a line into words and redirection operators. Quotes and backslashes work as in sh
/// (without expansions); an unquoted `#` starting a word starts a comment.
pub fn tokenize(line: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    // Distinguishes an empty quoted word ('') from no word at all.
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' => {
                if in_word {
                    tokens.push(Token::Word(std::mem::take(&mut word)));
                    in_word = false;
                }
            }
            '#' if !in_word => break,
            '>' => {
                if in_word {
                    tokens.push(Token::Word(std::mem::take(&mut word)));
                    in_word = false;
                }
                if chars.peek() == Some(&'>') {
                    chars.next();
                    tokens.push(Token::Append);
                } else {
                    tokens.push(Token::Out);
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("unterminated '".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("unterminated \"".into()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("unterminated \"".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                // A trailing backslash stands for itself.
                word.push(chars.next().unwrap_or('\\'));
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        tokens.push(Token::Word(word));
    }
    Ok(tokens)
}

/// Where a command's output goes instead of the console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    pub path: String,
    pub append: bool,
}

/// A parsed command line: the words and at most one output redirection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    pub words: Vec<String>,
    pub redirect: Option<Redirect>,
}

/// Parses a line; `None` for a blank line or a comment.
pub fn parse(line: &str) -> Result<Option<CommandLine>, String> {
    let mut words = Vec::new();
    let mut redirect = None;
    let mut tokens = tokenize(line)?.into_iter();
    while let Some(token) = tokens.next() {
        let append = match token {
            Token::Word(w) => {
                words.push(w);
                continue;
            }
            Token::Out => false,
            Token::Append => true,
        };
        let op = if append { ">>" } else { ">" };
        let Some(Token::Word(path)) = tokens.next() else {
            return Err(format!("{op} needs a file name"));
        };
        if redirect.is_some() {
            return Err("only one redirection per command".into());
        }
        redirect = Some(Redirect { path, append });
    }
    match (words.is_empty(), &redirect) {
        (true, None) => Ok(None),
        (true, Some(_)) => Err("a redirection needs a command".into()),
        (false, _) => Ok(Some(CommandLine { words, redirect })),
    }
}

/// Reads commands until `exit` or end of input. Never fails: every error is printed.
/// `reap`: reap orphaned processes after each command (as PID 1).
pub fn run(input: &mut dyn BufRead, out: &mut dyn Write, reap: bool) {
    let mut line = String::new();
    loop {
        let _ = write!(out, "ue# ");
        let _ = out.flush();
        line.clear();
        // An input error (the console going away) ends the shell like end of input.
        if !matches!(input.read_line(&mut line), Ok(n) if n > 0) {
            let _ = writeln!(out);
            return;
        }
        let keep_going = match parse(&line) {
            Ok(None) => true,
            Ok(Some(cmd)) => execute(&cmd, out),
            Err(e) => {
                let _ = writeln!(out, "{e}");
                true
            }
        };
        if reap {
            sys::reap_zombies();
        }
        if !keep_going {
            return;
        }
    }
}

/// Runs one command; false for `exit`.
pub fn execute(cmd: &CommandLine, out: &mut dyn Write) -> bool {
    let name = cmd.words[0].as_str();
    let args = &cmd.words[1..];
    // Output is gathered first so a redirection writes it with a single write(2).
    let mut buf = Vec::new();
    let result: Result<(), String> = match name {
        "exit" => return false,
        "help" => {
            buf.extend_from_slice(HELP.as_bytes());
            Ok(())
        }
        "pwd" => std::env::current_dir()
            .map(|d| buf.extend_from_slice(format!("{}\n", d.display()).as_bytes()))
            .map_err(|e| format!("pwd: {}", sys::error_name(&e))),
        "cd" => {
            let dir = args.first().map(String::as_str).unwrap_or("/");
            std::env::set_current_dir(dir).map_err(|e| format!("cd: {dir}: {}", sys::error_name(&e)))
        }
        "ls" => ls(args.first().map(String::as_str).unwrap_or("."), &mut buf),
        "cat" if args.is_empty() => Err("usage: cat PATH...".into()),
        "cat" => args.iter().try_for_each(|path| {
            fs::read(path).map(|data| buf.extend(data)).map_err(|e| format!("cat: {path}: {}", sys::error_name(&e)))
        }),
        "echo" => {
            let (newline, words) = match args.first().map(String::as_str) {
                Some("-n") => (false, &args[1..]),
                _ => (true, args),
            };
            buf.extend_from_slice(words.join(" ").as_bytes());
            if newline {
                buf.push(b'\n');
            }
            Ok(())
        }
        "run" if cmd.redirect.is_some() => Err("run: redirection is not supported".into()),
        "run" => run_program(args, out),
        _ => Err(format!("unknown command: {name} (try help)")),
    };
    // What a command produced before an error is still shown.
    let written = match &cmd.redirect {
        Some(r) if result.is_ok() => write_redirect(r, &buf),
        Some(_) => Ok(()),
        None => out.write_all(&buf).map_err(|e| sys::error_name(&e)),
    };
    for err in [result.err(), written.err()].into_iter().flatten() {
        let _ = writeln!(out, "{err}");
    }
    let _ = out.flush();
    true
}

fn ls(path: &str, buf: &mut Vec<u8>) -> Result<(), String> {
    let err = |e: std::io::Error| format!("ls: {path}: {}", sys::error_name(&e));
    if !fs::metadata(path).map_err(err)?.is_dir() {
        buf.extend_from_slice(format!("{path}\n").as_bytes());
        return Ok(());
    }
    let mut names: Vec<String> = fs::read_dir(path)
        .map_err(err)?
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                name + "/"
            } else {
                name
            }
        })
        .collect();
    names.sort();
    for name in names {
        buf.extend_from_slice(format!("{name}\n").as_bytes());
    }
    Ok(())
}

fn write_redirect(r: &Redirect, data: &[u8]) -> Result<(), String> {
    let mut options = OpenOptions::new();
    if r.append {
        options.append(true);
    } else {
        options.write(true).truncate(true);
    }
    let err = |e: std::io::Error| format!("{}: {}", r.path, sys::error_name(&e));
    let mut file = options.create(true).open(Path::new(&r.path)).map_err(err)?;
    match file.write(data).map_err(err)? {
        n if n == data.len() => Ok(()),
        n => Err(format!("{}: short write of {n} of {} bytes", r.path, data.len())),
    }
}

fn run_program(args: &[String], out: &mut dyn Write) -> Result<(), String> {
    let Some((program, rest)) = args.split_first() else {
        return Err("usage: run PATH [ARGS...]".into());
    };
    let _ = out.flush();
    let status =
        Command::new(program).args(rest).status().map_err(|e| format!("run: {program}: {}", sys::error_name(&e)))?;
    let text = match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, signal) => format!("killed by signal {}", signal.unwrap_or(0)),
    };
    let _ = writeln!(out, "{text}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        tokenize(line)
            .unwrap()
            .into_iter()
            .map(|t| match t {
                Token::Word(w) => w,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn tokenizer_handles_quotes_and_escapes() {
        assert_eq!(words("  ls   /sys  "), ["ls", "/sys"]);
        assert_eq!(
            words(r#"echo 'u:test u32 count' "a \"b\" \\ \n" c\ d"#),
            ["echo", "u:test u32 count", "a \"b\" \\ \\n", "c d"]
        );
        assert_eq!(words(r#"echo '' "" x"#), ["echo", "", "", "x"]);
        assert_eq!(words(r#"echo ab'cd'"ef""#), ["echo", "abcdef"]);
        assert_eq!(words("echo a # a comment"), ["echo", "a"]);
        assert_eq!(words("echo a#b '#c'"), ["echo", "a#b", "#c"]);
        assert_eq!(words("# only a comment"), Vec::<String>::new());
        assert!(tokenize("echo 'open").is_err());
        assert!(tokenize("echo \"open").is_err());
    }

    #[test]
    fn tokenizer_finds_redirections() {
        use Token::*;
        let w = |s: &str| Word(s.into());
        assert_eq!(tokenize("echo 1 > enable").unwrap(), [w("echo"), w("1"), Out, w("enable")]);
        assert_eq!(tokenize("echo 1>>enable").unwrap(), [w("echo"), w("1"), Append, w("enable")]);
        assert_eq!(tokenize("echo '>' \">>\" \\>").unwrap(), [w("echo"), w(">"), w(">>"), w(">")]);
    }

    #[test]
    fn parse_builds_commands_with_one_redirection() {
        let cmd = parse("echo 'u:test u32 x' >> /sys/kernel/tracing/dynamic_events").unwrap().unwrap();
        assert_eq!(cmd.words, ["echo", "u:test u32 x"]);
        assert_eq!(cmd.redirect, Some(Redirect { path: "/sys/kernel/tracing/dynamic_events".into(), append: true }));
        let cmd = parse("echo > out x").unwrap().unwrap();
        assert_eq!(cmd.words, ["echo", "x"]);
        assert_eq!(cmd.redirect, Some(Redirect { path: "out".into(), append: false }));
        assert_eq!(parse("   ").unwrap(), None);
        assert_eq!(parse("echo >").unwrap_err(), "> needs a file name");
        assert_eq!(parse("echo > a >> b").unwrap_err(), "only one redirection per command");
        assert_eq!(parse("> a").unwrap_err(), "a redirection needs a command");
        assert_eq!(parse("echo >> >").unwrap_err(), ">> needs a file name");
    }

    #[test]
    fn a_session_writes_reads_and_survives_errors() {
        let dir = std::env::temp_dir().join(format!("ue-agent-shell-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("sub")).unwrap();
        let f = dir.join("f");
        let d = dir.display();
        let script = format!(
            "echo 'one two' > {d}/f\necho -n three >> {d}/f\ncat {d}/f\nls {d}\ncat {d}/missing\nbogus\necho 'x\nexit\necho not reached\n"
        );
        let mut out = Vec::new();
        run(&mut script.as_bytes(), &mut out, false);
        assert_eq!(fs::read_to_string(&f).unwrap(), "one two\nthree");
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            out,
            format!(
                "ue# ue# ue# one two\nthreeue# f\nsub/\nue# cat: {d}/missing: ENOENT\nue# unknown command: bogus (try help)\nue# unterminated '\nue# "
            )
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn run_reports_the_exit_status() {
        let mut out = Vec::new();
        run(&mut "run /bin/sh -c 'exit 3'\nrun /nonexistent\n".as_bytes(), &mut out, false);
        assert_eq!(String::from_utf8(out).unwrap(), "ue# exit status 3\nue# run: /nonexistent: ENOENT\nue# \n");
    }
}
