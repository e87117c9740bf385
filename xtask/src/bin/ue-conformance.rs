//! `ue-conformance`: the installed spelling of `cargo xtask` (`cargo install --path xtask
//! --locked --bin ue-conformance`), the same program, usable from any folder such as a kernel tree.

#[path = "../main.rs"]
mod entry;

fn main() -> std::process::ExitCode {
    entry::main()
}
