//! The hostile fixture server; see `mcp_framer_e2e::hostile`.

fn main() -> std::process::ExitCode {
    mcp_framer_e2e::hostile::main()
}
