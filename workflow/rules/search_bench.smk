# The search benchmark (benchmarks/search.py, no GPU): the default search,
# TPE, random search and Kernel Tuner's strategies replayed on the shipped
# exhaustive tables (benchmarks/tables/), 50 seeds, both value orders.
# Needs the bench extra (pip install -e '.[bench]'). Not part of `all`:
#   snakemake --cores 2 search_benchmark


rule search_benchmark:
    input:
        sorted(str(p) for p in Path("benchmarks/tables").glob("*.parquet")),
    output:
        text=RESULTS.search_benchmark / "search-benchmark.txt",
        json=RESULTS.search_benchmark / "search-benchmark.json",
    log:
        RESULTS.search_benchmark / "search-benchmark.log",
    conda:
        "../envs/bench.yaml"
    threads: 16  # scaled down to --cores
    shell:
        '"$PYTHON" benchmarks/search.py --jobs {threads} --out "$(dirname {output.text:q})" > {log:q} 2>&1'
