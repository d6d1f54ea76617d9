#!/bin/sh
# CPU per MiB (benches/src/bin/pipe_profile.rs), run from the repository root
# after `cargo build --profile bench -p mcp-framer-benches --bin pipe_profile --bin pipe_writer`;
# interleaved: 3 rounds x (raw-drain, host-session multi, host-session current) x 3 sizes, 5 runs each.
B=./target/release/pipe_profile
echo "# $(date -u +%FT%TZ) uptime: $(uptime)"
for round in 1 2 3; do
  for s in 200 65536 1048576; do
    echo "round=$round size=$s raw-drain        $($B raw-drain $s --runs 5 | tail -1 | cut -d' ' -f2-4)"
    echo "round=$round size=$s host-session/mt  $($B host-session $s --runs 5 --flavor multi | tail -1 | cut -d' ' -f2-4,10-)"
    echo "round=$round size=$s host-session/ct  $($B host-session $s --runs 5 --flavor current | tail -1 | cut -d' ' -f2-4,10-)"
  done
done
echo "# $(date -u +%FT%TZ) uptime: $(uptime)"
