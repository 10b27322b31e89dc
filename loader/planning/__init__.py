"""The capacity and cost model behind ``ipmeta plan``: pure arithmetic, no AWS (``docs/capacity.md``).

- ``write_model``: DynamoDB's partitions, the client and split for heat, second
  by second: how fast a write order goes, and the pre-warming a target time needs;
- ``costs``: what a load's writes and storage cost, and lookups per API front;
- ``regions``: what each replica region adds (``replicaRegions``): replicated writes,
  transfer, storage, arrival checks, lookups spread over the regions;
- ``fixed_bill``: what the default stack costs a month before any lookup or load, line by line;
- ``load_plan``: everything ``ipmeta plan`` reports about one load;
- ``blog``: the AWS blog's four loads, reproduced by the model;
- ``enrich_costs``: what ``ipmeta enrich`` costs on AWS, next to the same addresses through the API;
- ``feed_costs``: what a network feed's scheduled checks cost a month, one schedule for the set
  against one per list.

Imports only the shared modules of ``loader`` (``reverse_index``) and
``ipmeta``: it never writes, and a load never consults it.
"""
