import sys, time
sys.path.insert(0, "tests/data")
import pandas as pd, optuna
from fake_family import FakeFamily, PROBLEM, measure
from tuner.study import run_study, study_rows
from tuner.replay import replay, format_table
fam = FakeFamily()
t0 = time.time()
o = run_study(family=fam, problem=PROBLEM, domains=None, storage=None, study_name="gp", measure=measure, budget_trials=30, timeout_s=None, sampler="gp")
print("gp study", o.measured, o.infeasible, o.duplicate, o.failed, o.stop_reason, o.best["bandwidth_gbs"], round(time.time()-t0, 2))
t0 = time.time()
df = replay(pd.read_parquet("tests/data/replay_table.parquet"), fam, PROBLEM, samplers=("tpe", "gp", "random"), budgets=(8, 16, 32, 64), seeds=range(5))
print(format_table(df)); print("replay s", round(time.time()-t0, 1))
