//! The tests of `kernel/kconfig.rs`.

use super::*;

fn cfg(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (format!("CONFIG_{k}"), v.to_string())).collect()
}

#[test]
fn fragments_parse_and_later_ones_override() {
    let a = Fragment { name: "common.config".into(), text: "CONFIG_A=y\n# CONFIG_B is not set\n".into() };
    let b = Fragment { name: "debug.config".into(), text: "# comment\n\nCONFIG_B=y\nCONFIG_C=\"x y\"\n".into() };
    let merged = merged_requests(&[a, b]).unwrap();
    let flat: Vec<_> = merged.values().map(|r| (r.option.as_str(), r.value.as_str(), r.origin.as_str())).collect();
    assert_eq!(
        flat,
        [
            ("CONFIG_A", "y", "common.config:1"),
            ("CONFIG_B", "y", "debug.config:3"),
            ("CONFIG_C", "\"x y\"", "debug.config:4"),
        ]
    );
}

#[test]
fn malformed_fragment_lines_name_file_and_line() {
    let f = Fragment { name: "x.config".into(), text: "CONFIG_A=y\nUSER_EVENTS=y\n".into() };
    let err = f.requests_at("kernel-configs/x.config").unwrap_err().to_string();
    assert!(err.contains("kernel-configs/x.config:2") && err.contains("USER_EVENTS=y"), "{err}");
    let f = Fragment { name: "x.config".into(), text: "CONFIG_A\n".into() };
    assert!(f.requests_at("x").unwrap_err().to_string().contains("x:1"));
    assert_eq!(crate::support::exit::code_for(&f.requests_at("x").unwrap_err()), 128);
    assert!(Fragment::from_cli(&["CONFIG_KASAN".into()]).is_err());
}

#[test]
fn check_reports_dropped_and_changed_options() {
    let f = Fragment {
        name: "f".into(),
        text: "CONFIG_USER_EVENTS=y\nCONFIG_FTRACE=y\n# CONFIG_GONE is not set\nCONFIG_NR_CPUS=4\n".into(),
    };
    let req = merged_requests(&[f]).unwrap();
    let eff = parse_config("CONFIG_FTRACE=y\nCONFIG_NR_CPUS=8\n");
    let missing = check(&req, &eff);
    assert_eq!(missing.len(), 2);
    assert_eq!(missing[0].option, "CONFIG_NR_CPUS");
    assert_eq!(missing[0].got.as_deref(), Some("8"));
    assert_eq!(missing[1].option, "CONFIG_USER_EVENTS");
    assert_eq!(missing[1].got, None);
    assert_eq!(missing[1].to_string(), "CONFIG_USER_EVENTS: asked for `y` (f:1), got absent");
}

const TRACE_KCONFIG: &str = "\
menuconfig FTRACE
\tbool \"Tracers\"
\tdepends on TRACING_SUPPORT
\tdefault y if DEBUG_KERNEL

if FTRACE

config USER_EVENTS
\tbool \"User trace events\"
\tselect TRACING
\thelp
\t  depends on nothing, this is help text.

menu \"Probes\"
\tdepends on KPROBES

config EPROBE_EVENTS
\tbool
\tdepends on TRACING && !FOO # a comment, and \"#\" in it
endmenu

endif # FTRACE
";

#[test]
fn definitions_carry_enclosing_if_and_menu_conditions() {
    let d = definitions_in(TRACE_KCONFIG, "USER_EVENTS");
    assert_eq!(d, [Definition { file: PathBuf::new(), line: 8, depends_on: vec!["FTRACE".into()], has_prompt: true }]);
    let d = definitions_in(TRACE_KCONFIG, "EPROBE_EVENTS");
    assert_eq!(d[0].depends_on, ["FTRACE", "KPROBES", "TRACING && !FOO"]);
    assert!(!d[0].has_prompt);
    let d = definitions_in(TRACE_KCONFIG, "FTRACE");
    assert_eq!(d[0].depends_on, ["TRACING_SUPPORT"]);
}

#[test]
fn expressions_evaluate_with_tristate_logic() {
    let c = cfg(&[("A", "y"), ("B", "m"), ("S", "\"virt\"")]);
    assert_eq!(eval("A && B", &c), 1);
    assert_eq!(eval("A && !C", &c), 2);
    assert_eq!(eval("C || (A && B)", &c), 1);
    assert_eq!(eval("S = \"virt\"", &c), 2);
    assert_eq!(eval("A != y", &c), 0);
    assert_eq!(eval("C", &c), 0);
}

#[test]
fn explain_names_the_unmet_dependency() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("kernel/trace")).unwrap();
    std::fs::create_dir_all(dir.path().join("arch/x86")).unwrap();
    std::fs::write(dir.path().join("kernel/trace/Kconfig"), TRACE_KCONFIG).unwrap();
    // A definition under another arch must not be reported for arm64.
    std::fs::write(dir.path().join("arch/x86/Kconfig"), "config USER_EVENTS\n\tdepends on X86\n").unwrap();
    let c = cfg(&[("TRACING_SUPPORT", "y")]);
    let why = explain(dir.path(), "arm64", "CONFIG_USER_EVENTS", &c);
    assert_eq!(why, "defined at kernel/trace/Kconfig:8; unmet: depends on FTRACE [FTRACE=n]");
    let c_on = cfg(&[("TRACING_SUPPORT", "y"), ("FTRACE", "y"), ("KPROBES", "y")]);
    let why = explain(dir.path(), "arm64", "CONFIG_EPROBE_EVENTS", &c_on);
    assert_eq!(why, "defined at kernel/trace/Kconfig:17; unmet: depends on TRACING && !FOO [TRACING=n FOO=n]");
    let why = explain(dir.path(), "arm64", "CONFIG_NOPE", &c);
    assert!(why.contains("no `config NOPE` entry"), "{why}");
}
