# A sample model-written data-analysis program: it reads the CSV it was
# handed (psych run --file examples/sales.csv), writes a summary table into
# its working directory, /work, which comes back as one of the run's files
# (psych run --out DIR), shows a bar chart, which comes back as an artifact
# (DIR/artifacts/figure-1.png), and hands back the totals as its value.
import csv
from collections import defaultdict

import matplotlib.pyplot as plt

revenue, units = defaultdict(float), defaultdict(int)
with open("sales.csv", newline="") as f:
    for row in csv.DictReader(f):
        revenue[row["region"]] += int(row["units"]) * float(row["price"])
        units[row["region"]] += int(row["units"])

regions = sorted(revenue, key=revenue.get, reverse=True)
with open("summary.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["region", "units", "revenue"])
    for r in regions:
        w.writerow([r, units[r], f"{revenue[r]:.2f}"])
print(f"{'region':<8}{'units':>6}{'revenue':>10}")
for r in regions:
    print(f"{r:<8}{units[r]:>6}{revenue[r]:>10.2f}")

fig, ax = plt.subplots(figsize=(5, 3))
ax.bar(regions, [revenue[r] for r in regions], color="#4a7ab5")
ax.set_title("Revenue by region")
ax.set_ylabel("revenue")
fig.tight_layout()
plt.show()  # in a run: captured as a PNG, as non-interactive Jupyter does

{r: round(revenue[r], 2) for r in regions}
