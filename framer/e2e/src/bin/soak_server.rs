//! The soak's server: six tools, newline or stdio-v2; see `mcp_framer_e2e::soak::server`.

fn main() -> std::process::ExitCode {
    mcp_framer_e2e::soak::server::main()
}
