//! The `stdio-v2` fixture server; see `mcp_framer_e2e::v2_server`.

fn main() -> std::process::ExitCode {
    mcp_framer_e2e::v2_server::main()
}
