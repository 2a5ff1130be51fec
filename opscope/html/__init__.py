"""The HTML toolkit every HTML renderer shares: one self-contained page (no network, opens from
disk), tables that sort and filter, and charts drawn in the page from the numbers it embeds."""
