//! The soak; see `mcp_framer_e2e::soak`.

fn main() -> std::process::ExitCode {
    mcp_framer_e2e::soak::main()
}
