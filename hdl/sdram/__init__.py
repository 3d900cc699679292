"""SDR SDRAM for the partition store: the timing (:mod:`.timing`), a cycle-accurate model that
checks every timing rule (:mod:`.model`, on Amaranth's simulator through :mod:`.sim`) and the
controller (:mod:`.controller`). hdl/sdram/README.md describes them."""
