source .devrun/setup.sh
echo "setup done at $SECONDS s"
name=$1; b=$2
timeout $((585 - SECONDS)) python3 -m scanrewrite.tune benchmarks/tune_flax_gpt.py:$name --ks 1 --stores 1 --memory-budget $b --compile-threads 8 -v > $OUT/tune_${name}_$b.log 2>&1
echo "=== exit $? at $SECONDS s" | tee -a $OUT/tune_${name}_$b.log
grep -E "^\| |pick|tuned in|budget" $OUT/tune_${name}_$b.log | cut -c1-260 | head -40
