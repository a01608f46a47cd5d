# The setting scripts/demo recommends at its end, from what the race against PyTorch measured.
# shellcheck shell=bash

# demo_recommendation TABLE [OPTION...]: the setting the race against PyTorch found fastest to
# accuracy on every link it measured (the libtorch MLP, docs/guide.md, "Which algorithm for which
# link"), as a scripts/demo command with OPTIONs and the period for the link of the run whose
# output is TABLE: one exchange of the model costs m / c local steps (the run's header line);
# k = 4 where that is at most 4, else 8. Prints nothing without m and c.
demo_recommendation() {
  local table="$1" m c
  shift
  read -r m c < <(sed -n 's/.*one all-reduce m = \([0-9.]*\) ms; one local step c = \([0-9.]*\) ms.*/\1 \2/p' \
    "$table" | head -n 1) || true
  [ -n "${m:-}" ] && [ -n "${c:-}" ] || return 0
  awk -v m="$m" -v c="$c" -v opts="${*:+$* }" 'BEGIN {
    if (c <= 0) exit
    s = m / c; k = (s <= 4) ? 4 : 8
    printf "== one exchange here costs %.1f local steps; the fastest to accuracy against PyTorch on every link\n", s
    printf "   measured (docs/guide.md): scripts/demo %s--algo cocod,cocod+dauto+outer+int8+f4 --period %d\n", opts, k }'
}
