//! The `mcp-probe` fixture server; see `mcp_framer_e2e::probe_fixture`.

fn main() -> std::process::ExitCode {
    mcp_framer_e2e::probe_fixture::main()
}
