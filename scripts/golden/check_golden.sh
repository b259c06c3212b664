#!/bin/sh
# Regenerates the golden CSV into OUT and compares it byte for byte with the shipped SHIPPED.
# Exit 77 (ctest SKIP_RETURN_CODE) when /usr/bin/python3 with mpmath is not available.
# Usage: check_golden.sh SCRIPT SHIPPED OUT
set -u
script="$1"; shipped="$2"; out="$3"
if [ ! -x /usr/bin/python3 ] || ! /usr/bin/python3 -c 'import mpmath' >/dev/null 2>&1; then
  echo "golden_csv_reproducible: SKIP (no /usr/bin/python3 with mpmath; apt-get install python3-mpmath)"
  exit 77
fi
/usr/bin/python3 "$script" "$out" || exit 1
if cmp -s "$out" "$shipped"; then
  echo "golden_csv_reproducible: $out matches $shipped"
  exit 0
fi
echo "golden_csv_reproducible: regenerated $out differs from shipped $shipped:"
diff "$shipped" "$out" | head -20
exit 1
