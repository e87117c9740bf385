//! Kconfig data without IO beyond reading files: fragments, `.config` parsing, the
//! requested-versus-effective check, and the `depends on` explanation for a dropped option.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::support::exit::{error, Kind};

/// The name of the fragment made from `--kconfig` options.
pub const CLI_FRAGMENT: &str = "command-line.config";

/// One `CONFIG_X=value` request, remembering where it came from for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub option: String,
    /// The value as written; `n` stands for `# CONFIG_X is not set`.
    pub value: String,
    pub origin: String,
}

/// A Kconfig fragment: its name (for the merge order and provenance) and its text.
#[derive(Debug, Clone)]
pub struct Fragment {
    pub name: String,
    pub text: String,
}

impl Fragment {
    pub fn read(path: &Path) -> Result<Fragment> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading config fragment {}", path.display()))?;
        let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let fragment = Fragment { name, text };
        fragment.requests_at(&path.display().to_string())?;
        Ok(fragment)
    }

    /// Builds the fragment for `--kconfig CONFIG_X=y` arguments.
    pub fn from_cli(args: &[String]) -> Result<Option<Fragment>> {
        if args.is_empty() {
            return Ok(None);
        }
        let text: String = args.iter().map(|a| format!("{a}\n")).collect();
        let fragment = Fragment { name: CLI_FRAGMENT.into(), text };
        fragment.requests_at("--kconfig")?;
        Ok(Some(fragment))
    }

    /// The requests in this fragment, or a bad-input error naming `origin:line`.
    pub fn requests_at(&self, origin: &str) -> Result<Vec<Request>> {
        let mut out = Vec::new();
        for (i, raw) in self.text.lines().enumerate() {
            let line = raw.trim();
            let here = format!("{origin}:{}", i + 1);
            if let Some(rest) = line.strip_prefix("# ").and_then(|r| r.strip_suffix(" is not set")) {
                check_name(rest, &here, raw)?;
                out.push(Request { option: rest.into(), value: "n".into(), origin: here });
            } else if line.is_empty() || line.starts_with('#') {
                continue;
            } else if let Some((name, value)) = line.split_once('=') {
                check_name(name, &here, raw)?;
                if value.is_empty() {
                    return Err(error(Kind::BadInput, format!("{here}: `{raw}` has no value after `=`")));
                }
                out.push(Request { option: name.into(), value: value.into(), origin: here });
            } else {
                return Err(error(
                    Kind::BadInput,
                    format!("{here}: `{raw}` is neither `CONFIG_X=value` nor `# CONFIG_X is not set`"),
                ));
            }
        }
        Ok(out)
    }
}

fn check_name(name: &str, here: &str, raw: &str) -> Result<()> {
    let ok = name
        .strip_prefix("CONFIG_")
        .is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'));
    if ok {
        Ok(())
    } else {
        Err(error(Kind::BadInput, format!("{here}: `{raw}`: `{name}` is not a CONFIG_ symbol name")))
    }
}

/// The profiles `<configs_dir>/profiles/` holds (the files' stems), sorted.
pub fn profile_names(configs_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(configs_dir.join("profiles"))
        .map(|d| {
            d.flatten().filter_map(|e| e.file_name().to_str()?.strip_suffix(".config").map(String::from)).collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The fragments for one build, in merge order: `common.config`, the arch's fragment, each
/// profile from `profiles/`, the user's fragment files, then `--kconfig` options.
pub fn fragments_for(
    configs_dir: &Path,
    arch_fragment: &str,
    profiles: &[String],
    files: &[PathBuf],
    cli: &[String],
) -> Result<Vec<Fragment>> {
    let mut out =
        vec![Fragment::read(&configs_dir.join("common.config"))?, Fragment::read(&configs_dir.join(arch_fragment))?];
    for p in profiles {
        let path = configs_dir.join("profiles").join(format!("{p}.config"));
        if !path.is_file() {
            let known = profile_names(configs_dir);
            return Err(error(
                Kind::BadInput,
                format!("--profile {p}: no {}; known profiles: {}", path.display(), known.join(", ")),
            ));
        }
        out.push(Fragment::read(&path)?);
    }
    for f in files {
        let frag =
            Fragment::read(f).map_err(|e| error(Kind::BadInput, format!("--fragment {}: {e:#}", f.display())))?;
        out.push(frag);
    }
    out.extend(Fragment::from_cli(cli)?);
    Ok(out)
}

/// Options a fragment asks for to make the build faster, not because a scenario needs them: how
/// the image is compressed (`kernel-configs/x86_64.config` picks lz4). A kernel the user built
/// (`--kernel-image`) is not checked for them.
pub const BUILD_CHOICES: [&str; 8] = [
    "CONFIG_KERNEL_GZIP",
    "CONFIG_KERNEL_BZIP2",
    "CONFIG_KERNEL_LZMA",
    "CONFIG_KERNEL_XZ",
    "CONFIG_KERNEL_LZO",
    "CONFIG_KERNEL_LZ4",
    "CONFIG_KERNEL_ZSTD",
    "CONFIG_KERNEL_UNCOMPRESSED",
];

/// The final request per option after all fragments, later fragments overriding earlier ones
/// (the `merge_config.sh` rule), in option order.
pub fn merged_requests(fragments: &[Fragment]) -> Result<BTreeMap<String, Request>> {
    let mut out = BTreeMap::new();
    for f in fragments {
        for r in f.requests_at(&f.name)? {
            out.insert(r.option.clone(), r);
        }
    }
    Ok(out)
}

/// Parses a `.config` into option -> value; `# CONFIG_X is not set` becomes `n`.
pub fn parse_config(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("# ").and_then(|r| r.strip_suffix(" is not set")) {
            out.insert(name.to_string(), "n".to_string());
        } else if let Some((name, value)) = line.split_once('=').filter(|_| line.starts_with("CONFIG_")) {
            out.insert(name.to_string(), value.to_string());
        }
    }
    out
}

/// A requested option whose value did not survive into the final `.config`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Missing {
    pub option: String,
    pub wanted: String,
    /// The value obtained, `None` when the symbol is absent from `.config` altogether.
    pub got: Option<String>,
    pub origin: String,
    /// Why, when the Kconfig sources could be read: the symbol's unmet dependencies.
    pub why: Option<String>,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let got = self.got.as_deref().map_or("absent".to_string(), |g| format!("`{g}`"));
        write!(f, "{}: asked for `{}` ({}), got {got}", self.option, self.wanted, self.origin)?;
        if let Some(why) = &self.why {
            write!(f, "; {why}")?;
        }
        Ok(())
    }
}

/// Compares requests with a final `.config`. A request for `n` is met when the option is
/// absent or `n` (an unset symbol is not written at all when its dependencies are unmet).
pub fn check(requested: &BTreeMap<String, Request>, effective: &BTreeMap<String, String>) -> Vec<Missing> {
    requested
        .values()
        .filter_map(|r| {
            let got = effective.get(&r.option);
            let met = match (r.value.as_str(), got) {
                ("n", None) => true,
                (want, Some(have)) => want == have,
                (_, None) => false,
            };
            (!met).then(|| Missing {
                option: r.option.clone(),
                wanted: r.value.clone(),
                got: got.cloned(),
                origin: r.origin.clone(),
                why: None,
            })
        })
        .collect()
}

/// Where and under which conditions a symbol is defined in the Kconfig sources.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Definition {
    pub file: PathBuf,
    pub line: usize,
    /// Each `depends on` expression, including those of enclosing `if` blocks and menus.
    pub depends_on: Vec<String>,
    /// Whether the entry has a prompt; without one only a `select` or a default sets it.
    pub has_prompt: bool,
}

/// Scans every Kconfig file of `srctree` that applies to `linux_arch` for `config SYMBOL`.
pub fn find_definitions(srctree: &Path, linux_arch: &str, symbol: &str) -> Vec<Definition> {
    let mut files = Vec::new();
    collect_kconfig_files(srctree, srctree, linux_arch, &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let rel = file.strip_prefix(srctree).unwrap_or(&file).to_path_buf();
        out.extend(definitions_in(&text, symbol).into_iter().map(|mut d| {
            d.file = rel.clone();
            d
        }));
    }
    out
}

fn collect_kconfig_files(root: &Path, dir: &Path, linux_arch: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_dir() {
            let skip_arch = dir == root.join("arch") && name != linux_arch;
            if !skip_arch && !name.starts_with('.') && name != "Documentation" {
                collect_kconfig_files(root, &path, linux_arch, out);
            }
        } else if ft.is_file() && name.starts_with("Kconfig") {
            out.push(path);
        }
    }
}

/// Finds `config SYMBOL` / `menuconfig SYMBOL` entries in one Kconfig file's text, with the
/// dependencies from the entry itself and from enclosing `if` / `menu` blocks.
pub fn definitions_in(text: &str, symbol: &str) -> Vec<Definition> {
    // Each open block contributes its condition (possibly none) until its end keyword.
    let mut blocks: Vec<(&str, Option<String>)> = Vec::new();
    let mut out = Vec::new();
    let mut current: Option<Definition> = None;
    let mut pending_menu = false;
    // Help text runs until the first non-blank line indented less than its first line.
    let mut help_indent: Option<Option<usize>> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = strip_comment(raw.trim());
        if let Some(indent) = help_indent {
            if line.is_empty() {
                continue;
            }
            let this = raw.chars().take_while(|c| c.is_whitespace()).map(|c| if c == '\t' { 8 } else { 1 }).sum();
            match indent {
                None => {
                    help_indent = Some(Some(this));
                    continue;
                }
                Some(first) if this >= first => continue,
                Some(_) => help_indent = None,
            }
        }
        let word = line.split_whitespace().next().unwrap_or("");
        if word == "help" || word == "---help---" {
            help_indent = Some(None);
            continue;
        }
        let rest = line[word.len()..].trim();
        let starts_entry = matches!(
            word,
            "config"
                | "menuconfig"
                | "choice"
                | "endchoice"
                | "menu"
                | "endmenu"
                | "if"
                | "endif"
                | "source"
                | "comment"
                | "mainmenu"
        );
        if starts_entry {
            pending_menu = false;
            if let Some(d) = current.take() {
                out.push(d);
            }
        }
        match word {
            "if" => blocks.push(("if", Some(rest.to_string()))),
            "menu" => {
                blocks.push(("menu", None));
                pending_menu = true;
            }
            "choice" => blocks.push(("choice", None)),
            "endif" | "endmenu" | "endchoice" => {
                blocks.pop();
            }
            "config" | "menuconfig" if rest == symbol => {
                let depends_on = blocks.iter().filter_map(|(_, c)| c.clone()).collect();
                current = Some(Definition { file: PathBuf::new(), line: i + 1, depends_on, has_prompt: false });
            }
            "bool" | "tristate" | "string" | "int" | "hex" | "prompt" if rest.starts_with('"') => {
                if let Some(d) = current.as_mut() {
                    d.has_prompt = true;
                }
            }
            "depends" => {
                let expr = rest.strip_prefix("on").map(str::trim).unwrap_or(rest).to_string();
                if let Some(d) = current.as_mut() {
                    d.depends_on.push(expr);
                } else if pending_menu {
                    if let Some(last) = blocks.last_mut() {
                        last.1 = Some(expr);
                    }
                }
            }
            _ => {}
        }
    }
    out.extend(current);
    out
}

/// A Kconfig line without its `#` comment (a `#` inside quotes is text).
fn strip_comment(line: &str) -> &str {
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted => return line[..i].trim_end(),
            _ => {}
        }
    }
    line
}

/// Evaluates a Kconfig expression against a `.config` (tristate logic, `n` < `m` < `y`).
pub fn eval(expr: &str, config: &BTreeMap<String, String>) -> u8 {
    let tokens = tokenize(expr);
    let mut p = Parser { tokens, pos: 0, config };
    p.or()
}

fn tokenize(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        if c.is_whitespace() {
            i += 1;
        } else if ["&&", "||", "!=", "<=", ">="].contains(&two.as_str()) {
            out.push(two);
            i += 2;
        } else if "()!=<>".contains(c) {
            out.push(c.to_string());
            i += 1;
        } else if c == '"' {
            let end = chars[i + 1..].iter().position(|&x| x == '"').map_or(chars.len(), |p| i + 1 + p);
            out.push(chars[i + 1..end].iter().collect());
            i = end + 1;
        } else {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            if i == start {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        }
    }
    out
}

struct Parser<'a> {
    tokens: Vec<String>,
    pos: usize,
    config: &'a BTreeMap<String, String>,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.pos).map(String::as_str)
    }
    fn or(&mut self) -> u8 {
        let mut v = self.and();
        while self.peek() == Some("||") {
            self.pos += 1;
            v = v.max(self.and());
        }
        v
    }
    fn and(&mut self) -> u8 {
        let mut v = self.unary();
        while self.peek() == Some("&&") {
            self.pos += 1;
            v = v.min(self.unary());
        }
        v
    }
    fn unary(&mut self) -> u8 {
        match self.peek() {
            Some("!") => {
                self.pos += 1;
                2 - self.unary()
            }
            Some("(") => {
                self.pos += 1;
                let v = self.or();
                if self.peek() == Some(")") {
                    self.pos += 1;
                }
                v
            }
            _ => self.comparison(),
        }
    }
    fn comparison(&mut self) -> u8 {
        let left = self.atom();
        match self.peek() {
            Some(op @ ("=" | "!=")) => {
                let eq = op == "=";
                self.pos += 1;
                let right = self.atom();
                if (self.value(&left) == self.value(&right)) == eq {
                    2
                } else {
                    0
                }
            }
            _ => tristate(&self.value(&left)),
        }
    }
    fn atom(&mut self) -> String {
        let t = self.tokens.get(self.pos).cloned().unwrap_or_default();
        self.pos += 1;
        t
    }
    /// A symbol's value, or the token itself for literals (`y`, `m`, `n`, numbers, strings).
    fn value(&self, token: &str) -> String {
        match token {
            "y" | "m" | "n" => token.to_string(),
            _ => match self.config.get(&format!("CONFIG_{token}")) {
                Some(v) => v.trim_matches('"').to_string(),
                None if token.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                    && token.chars().any(|c| c.is_ascii_uppercase()) =>
                {
                    "n".to_string()
                }
                None => token.to_string(),
            },
        }
    }
}

fn tristate(v: &str) -> u8 {
    match v {
        "y" => 2,
        "m" => 1,
        _ => 0,
    }
}

/// Explains why `option` did not get its value: the definition site and each unmet
/// `depends on`, with the current value of every symbol it names.
pub fn explain(srctree: &Path, linux_arch: &str, option: &str, config: &BTreeMap<String, String>) -> String {
    let symbol = option.trim_start_matches("CONFIG_");
    let defs = find_definitions(srctree, linux_arch, symbol);
    if defs.is_empty() {
        return format!("no `config {symbol}` entry exists for ARCH={linux_arch} in this source tree");
    }
    let mut parts = Vec::new();
    for d in &defs {
        let unmet: Vec<String> = d
            .depends_on
            .iter()
            .filter(|e| eval(e, config) == 0)
            .map(|e| format!("depends on {e} [{}]", annotate(e, config)))
            .collect();
        let site = format!("{}:{}", d.file.display(), d.line);
        if unmet.is_empty() {
            parts.push(format!("defined at {site}; its dependencies are met, so a `select` or a `choice` decided"));
        } else {
            parts.push(format!("defined at {site}; unmet: {}", unmet.join(", ")));
        }
    }
    parts.join("; ")
}

fn annotate(expr: &str, config: &BTreeMap<String, String>) -> String {
    let mut seen = Vec::new();
    for t in tokenize(expr) {
        let is_symbol = t.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            && t.chars().any(|c| c.is_ascii_uppercase());
        if is_symbol && !seen.iter().any(|s: &String| s.starts_with(&format!("{t}="))) {
            let v = config.get(&format!("CONFIG_{t}")).map_or("n", String::as_str);
            seen.push(format!("{t}={v}"));
        }
    }
    seen.join(" ")
}

#[cfg(test)]
mod tests;
