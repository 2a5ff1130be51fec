"""The text toolkit every renderer shares: aligned and Markdown tables (`table`) and one
way to write each kind of number (`numbers`: counts, bytes, FLOPs, percentages, times).
"""
