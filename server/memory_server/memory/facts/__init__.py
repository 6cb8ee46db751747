"""Long-term facts as values: the bitemporal fact and its versions (model), the small shape a
fact's text is compared by (shape), the values that make two statements differ (values), the
ADD / UPDATE / DELETE / NONE decisions (reconcile, restated), and retention."""
