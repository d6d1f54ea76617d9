//! The library-built fixture server; see `mcp_framer_e2e::lib_server`.

fn main() -> std::process::ExitCode {
    mcp_framer_e2e::lib_server::main()
}
