"""Reports: Plotly figures (pure functions of result tables) and the self-contained HTML page.

Installed as mobiperf.reports.
"""
